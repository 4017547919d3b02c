"""Paired statistics over per-query scores, for comparing two configurations on the same queries.

Every function takes per-query arrays (one value per query, NaN where the metric is undefined, e.g.
ranking metrics on unanswerable queries) and is deterministic for a given ``seed``. Resampling is
vectorised: the bootstrap index matrix and the sign matrix are drawn in row chunks of at most
``_CHUNK_ELEMENTS`` cells, so memory stays bounded however many queries or resamples there are.

- :func:`paired_bootstrap_ci`: percentile bootstrap CI of the mean.
- :func:`paired_bootstrap_diff_ci`: the same for the mean paired difference ``a - b``.
- :func:`randomization_test`: two-sided sign-flip test of ``mean(a - b) == 0``.
- :func:`align`: the wide query x config table those pairs come from.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

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
