"""Paired statistics over per-query scores, for comparing two configurations on the same queries.

Every function takes per-query arrays (one value per query, NaN where the metric is undefined, e.g.
ranking metrics on unanswerable queries) and is deterministic for a given ``seed``. Resampling is
vectorised: the bootstrap index matrix and the sign matrix are drawn in row chunks of at most
``_CHUNK_ELEMENTS`` cells, so memory stays bounded however many queries or resamples there are.

- :func:`paired_bootstrap_ci`: percentile bootstrap CI of the mean.
- :func:`paired_bootstrap_diff_ci`: the same for the mean paired difference ``a - b``.
- :func:`randomization_test`: two-sided sign-flip test of ``mean(a - b) == 0``.
- :func:`holm`: Holm step-down adjustment of a family of p-values (many configurations vs one).
- :func:`align`: the wide query x config table those pairs come from.
- :func:`normal_mean_ci` and :func:`ppi_mean_ci`: normal-approximation CIs of a mean, from a
  sample alone and prediction-powered (a cheap predictor on many items, corrected by the few items
  with the true value; Angelopoulos et al. 2023), for judges calibrated against human labels.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd

# cells per drawn block (8 MiB of float64): large enough to amortise numpy overhead, small enough
# that 10^4 resamples x 10^5 queries does not allocate 8 GB at once
_CHUNK_ELEMENTS = 1 << 20


def _chunks(total: int, n: int) -> Iterator[int]:
    """Row counts summing to ``total``, each block holding at most ``_CHUNK_ELEMENTS`` cells of
    width ``n``."""
    rows = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, total, rows):
        yield min(rows, total - start)


def _finite(values: np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    return x[np.isfinite(x)]


def _paired_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a - b`` over the pairs where both sides are finite; raises if the arrays are not paired."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired arrays must have the same length, got {a.size} and {b.size}")
    keep = np.isfinite(a) & np.isfinite(b)
    return a[keep] - b[keep]


def _bootstrap_mean_ci(
    x: np.ndarray, n_resamples: int, alpha: float, seed: int
) -> tuple[float, float, float]:
    """Percentile bootstrap of the mean of the already-cleaned sample ``x``."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    n = x.size
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if n == 1 or np.all(x == x[0]):
        # every resample has the same mean: skip the draw, and avoid float noise in the bounds
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [x[rng.integers(0, n, size=(rows, n))].mean(axis=1) for rows in _chunks(n_resamples, n)]
    )
    low, high = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return mean, float(low), float(high)


def paired_bootstrap_ci(
    values: np.ndarray, n_resamples: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """``(mean, low, high)``: percentile bootstrap ``1 - alpha`` CI of the mean of per-query values.

    NaN (and inf) values are dropped first, so the mean equals the NaN-skipping mean of
    ``metrics.json``. A constant sample gives ``low == mean == high``; an empty one gives NaNs.
    ``mean`` is the sample mean, not the mean of the bootstrap distribution."""
    return _bootstrap_mean_ci(_finite(values), n_resamples, alpha, seed)


def paired_bootstrap_diff_ci(
    a: np.ndarray, b: np.ndarray, n_resamples: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """``(mean of a - b, low, high)``: percentile bootstrap CI resampling queries jointly.

    ``a[i]`` and ``b[i]`` must score the same query (see :func:`align`); only pairs where both are
    finite are used. Resampling a query keeps its pair together, which is what makes the interval
    narrower than one built from two independent CIs when configurations agree on hard queries."""
    return _bootstrap_mean_ci(_paired_diff(a, b), n_resamples, alpha, seed)


def randomization_test(
    a: np.ndarray, b: np.ndarray, n_permutations: int = 10000, seed: int = 0
) -> float:
    """Two-sided paired randomisation (sign-flip) test of ``mean(a - b) == 0``.

    Under the null each query's difference is equally likely to have either sign, so the statistic
    ``|mean(d)|`` is compared with ``|mean(s * d)|`` for ``n_permutations`` random sign vectors
    ``s``. Returns ``(count_extreme + 1) / (n_permutations + 1)`` (the +1 counts the observed
    labelling, so p is never 0). Pairs with a NaN on either side are dropped. Identical inputs
    (all differences zero) give exactly 1.0; no usable pair gives NaN."""
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations}")
    d = _paired_diff(a, b)
    n = d.size
    if n == 0:
        return math.nan
    if not d.any():
        return 1.0
    observed = abs(d.sum())
    # the identity flip recomputed by a matrix product can land an ulp below the observed sum;
    # without the tolerance ties with the observed value would be missed (p biased low)
    threshold = observed - 1e-12 * np.abs(d).sum()
    rng = np.random.default_rng(seed)
    extreme = 0
    for rows in _chunks(n_permutations, n):
        signs = np.where(rng.random((rows, n)) < 0.5, -1.0, 1.0)
        extreme += int(np.count_nonzero(np.abs(signs @ d) >= threshold))
    return (extreme + 1) / (n_permutations + 1)


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values, in the input order: the ``i``-th smallest of the ``m``
    finite p-values becomes ``max_{j <= i} min(1, (m - j + 1) * p_(j))``. Rejecting where the
    adjusted value is ``< alpha`` controls the family-wise error rate at ``alpha`` under any
    dependence between the tests. NaN stays NaN and does not count in ``m``."""
    p = np.asarray(p_values, dtype=np.float64).ravel()
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    m = idx.size
    if m == 0:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


def align(per_query: Mapping[str, pd.DataFrame], metric: str) -> pd.DataFrame:
    """Wide table of one ``metric``: index ``query_id``, one column per config (in mapping order).

    Inner join on ``query_id``, so each row is a real pair across all configs; a query missing from
    any config is dropped. NaN values are kept (the paired tests drop them pair by pair). Raises
    ``KeyError`` if a table lacks the metric column and ``ValueError`` on duplicate query ids."""
    columns = []
    for name, table in per_query.items():
        if metric not in table.columns:
            raise KeyError(f"config {name!r} has no per-query column {metric!r}")
        if table["query_id"].duplicated().any():
            raise ValueError(f"config {name!r} has duplicate query ids")
        columns.append(table.set_index("query_id")[metric].astype(np.float64).rename(name))
    if not columns:
        return pd.DataFrame(index=pd.Index([], name="query_id"))
    wide = pd.concat(columns, axis=1, join="inner")
    wide.index.name = "query_id"
    return wide


def _z(alpha: float) -> float:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    from scipy.stats import norm

    return float(norm.ppf(1 - alpha / 2))


def _var(x: np.ndarray) -> float:
    return float(x.var(ddof=1)) if x.size > 1 else math.nan


def normal_mean_ci(values: np.ndarray, alpha: float = 0.05) -> tuple[float, float, float]:
    """``(mean, low, high)``: ``mean ± z(1 - alpha/2) * sd / sqrt(n)`` (sample sd, ``ddof=1``)
    over the finite values. One value gives NaN bounds, none gives NaNs."""
    x = _finite(values)
    z = _z(alpha)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean, half = float(x.mean()), z * math.sqrt(_var(x) / x.size)
    return mean, mean - half, mean + half


class PPIMean(NamedTuple):
    """A prediction-powered estimate of a mean: ``estimate`` with its normal CI ``[low, high]``
    and standard error ``se``; ``predicted`` (the predictor's mean on the unlabelled items),
    ``rectifier`` (``mean(label - lam * prediction)`` on the labelled ones, the correction),
    ``lam`` (1 = the standard estimator), ``n_labelled``, ``n_unlabelled``."""

    estimate: float
    low: float
    high: float
    se: float
    predicted: float
    rectifier: float
    lam: float
    n_labelled: int
    n_unlabelled: int


def ppi_mean_ci(
    labels: np.ndarray,
    predicted_labelled: np.ndarray,
    predicted_unlabelled: np.ndarray,
    alpha: float = 0.05,
    lam: float | None = 1.0,
) -> PPIMean:
    """Prediction-powered CI of ``E[Y]`` (Angelopoulos, Bates, Fannjiang, Jordan, Zrnic,
    *Prediction-powered inference*, Science 2023; ``lam`` as in PPI++, Angelopoulos, Duchi, Zrnic
    2023). ``labels[i]`` is the true value of a labelled item and ``predicted_labelled[i]`` the
    predictor's value on the same item; ``predicted_unlabelled`` holds the predictor on items
    without a label, drawn from the same population (disjoint from the labelled ones).

    ``estimate = lam * mean(f_unlabelled) + mean(y - lam * f_labelled)``, i.e. the predictor's mean
    corrected by its mean error on the labelled items (the rectifier), with
    ``se**2 = lam**2 * var(f_unlabelled) / N + var(y - lam * f_labelled) / n`` (sample variances)
    and the interval ``estimate ± z(1 - alpha/2) * se``. ``lam=1`` is the standard estimator:
    unbiased whatever the predictor's bias. ``lam=None`` uses the variance-minimising
    ``lam = cov(y, f) / ((1 + n/N) var(f))`` clipped to [0, 1] (estimated on the labelled items),
    so a useless predictor falls back to the labels alone (``lam = 0``: the classical CI).

    Pairs where the label or the prediction is not finite are dropped. No unlabelled item gives
    the classical CI of the labels; fewer than 2 labelled items give NaN bounds."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    f = np.asarray(predicted_labelled, dtype=np.float64).ravel()
    if y.shape != f.shape:
        raise ValueError(f"labels and their predictions differ in length: {y.size} vs {f.size}")
    keep = np.isfinite(y) & np.isfinite(f)
    y, f = y[keep], f[keep]
    fu = _finite(predicted_unlabelled)
    n, big_n = y.size, fu.size
    z = _z(alpha)
    if n == 0:
        nan = math.nan
        return PPIMean(nan, nan, nan, nan, float(fu.mean()) if big_n else nan, nan, nan, 0, big_n)
    if big_n == 0:
        lam = 0.0
    elif lam is None:
        var_f = _var(f)
        cov = float(np.cov(y, f, ddof=1)[0, 1]) if n > 1 else math.nan
        lam = cov / ((1 + n / big_n) * var_f) if var_f > 0 and math.isfinite(cov) else 0.0
        lam = min(1.0, max(0.0, lam))
    predicted = float(fu.mean()) if big_n else math.nan
    rect = y - lam * f
    rectifier = float(rect.mean())
    estimate = (lam * predicted if big_n else 0.0) + rectifier
    var = _var(rect) / n + ((lam**2) * _var(fu) / big_n if big_n and lam else 0.0)
    se = math.sqrt(var) if math.isfinite(var) else math.nan
    return PPIMean(
        estimate, estimate - z * se, estimate + z * se, se, predicted, rectifier, lam, n, big_n
    )
