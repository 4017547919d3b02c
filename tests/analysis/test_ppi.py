"""Prediction-powered CI of a mean (``ppi_mean_ci``) and the normal CI (``normal_mean_ci``):
formulas on small inputs, and simulations where the true mean is known (a biased predictor is
corrected; the CI covers the truth at about its nominal rate)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from rag_lab.analysis.stats import normal_mean_ci, ppi_mean_ci

# the standard normal's 97.5% quantile from the standard library (rag_lab's comes from scipy):
# scipy.stats is not imported at collection, where every xdist worker paid ~1.5 CPU-s for it
Z95 = NormalDist().inv_cdf(0.975)


def test_normal_mean_ci_formula():
    x = np.array([1.0, 0.0, 1.0, 1.0, np.nan])
    mean, low, high = normal_mean_ci(x)
    sd = math.sqrt(((1 - 0.75) ** 2 * 3 + 0.75**2) / 3)
    assert mean == 0.75
    assert low == pytest.approx(0.75 - Z95 * sd / 2) and high == pytest.approx(0.75 + Z95 * sd / 2)
    assert math.isnan(normal_mean_ci(np.array([1.0]))[1])
    assert all(math.isnan(v) for v in normal_mean_ci(np.array([])))


def test_ppi_formula_on_a_small_example():
    y = np.array([1, 0, 1, 1], dtype=float)
    f = np.array([0.9, 0.2, 0.4, 0.8])
    fu = np.array([0.5, 0.7, 1.0, 0.0, 0.6])
    est = ppi_mean_ci(y, f, fu)
    rect = y - f  # [0.1, -0.2, 0.6, 0.2]
    expected = fu.mean() + rect.mean()
    se = math.sqrt(fu.var(ddof=1) / 5 + rect.var(ddof=1) / 4)
    assert est.estimate == pytest.approx(expected) and est.se == pytest.approx(se)
    assert est.low == pytest.approx(expected - Z95 * se)
    assert est.high == pytest.approx(expected + Z95 * se)
    assert est.predicted == pytest.approx(0.56) and est.rectifier == pytest.approx(0.175)
    assert (est.lam, est.n_labelled, est.n_unlabelled) == (1.0, 4, 5)
    # a wider level, a wider interval around the same estimate
    wide = ppi_mean_ci(y, f, fu, alpha=0.01)
    assert wide.estimate == est.estimate and wide.high - wide.low > est.high - est.low


def test_ppi_edge_cases():
    y, f = np.array([1.0, 0.0, 1.0]), np.array([1.0, 1.0, np.nan])
    # the pair with a NaN prediction is dropped; no unlabelled item: the labels' own CI
    est = ppi_mean_ci(y, f, np.array([]))
    assert (est.n_labelled, est.n_unlabelled, est.lam) == (2, 0, 0.0)
    assert (est.estimate, est.low, est.high) == pytest.approx(normal_mean_ci(np.array([1.0, 0.0])))
    assert math.isnan(ppi_mean_ci(np.array([]), np.array([]), np.array([0.5])).estimate)
    assert math.isnan(ppi_mean_ci(np.array([1.0]), np.array([1.0]), np.array([0.5, 1.0])).low)
    with pytest.raises(ValueError, match="differ in length"):
        ppi_mean_ci(np.array([1.0]), np.array([1.0, 0.0]), np.array([0.5]))
    with pytest.raises(ValueError, match="alpha"):
        ppi_mean_ci(y, y, y, alpha=1.0)


def simulate(rng, n=100, big_n=2000, p=0.7):
    """Labels ~ Bernoulli(p); a lenient judge: faithful answers score ~0.85, unfaithful ones
    ~0.65 (noise sd 0.15, clipped to [0, 1]), so its mean is about 0.65 + 0.2 p: 0.79 for
    p = 0.7, an overstatement of about 0.09. Returns labelled y, f and the unlabelled f."""
    y = (rng.random(n + big_n) < p).astype(float)
    f = np.clip(np.where(y == 1, 0.85, 0.65) + rng.normal(0, 0.15, y.size), 0, 1)
    return y[:n], f[:n], f[n:]


def test_a_biased_judge_is_corrected_and_the_ci_covers_the_truth():
    rng = np.random.default_rng(0)
    p, reps = 0.7, 400
    covered = naive_covered = 0
    estimates, naive = [], []
    for _ in range(reps):
        y, f, fu = simulate(rng, p=p)
        est = ppi_mean_ci(y, f, fu)
        covered += est.low <= p <= est.high
        estimates.append(est.estimate)
        naive.append(np.concatenate([f, fu]).mean())
        m, lo, hi = normal_mean_ci(np.concatenate([f, fu]))
        naive_covered += lo <= p <= hi
    # the judge alone is off by ~0.09 with a tight CI that almost never covers the truth
    assert abs(np.mean(naive) - p) > 0.06 and naive_covered / reps < 0.05
    # corrected: unbiased, and the 95% CI covers p in about 95% of the repetitions
    assert abs(np.mean(estimates) - p) < 0.005
    assert 0.92 <= covered / reps <= 0.98


def test_a_good_judge_narrows_the_interval_a_useless_one_does_not_with_power_tuning():
    rng = np.random.default_rng(1)
    y_good, f_good, fu_good = simulate(rng, n=200, big_n=5000)
    labels_only = normal_mean_ci(y_good)
    good = ppi_mean_ci(y_good, f_good, fu_good)
    assert good.high - good.low < labels_only[2] - labels_only[1]
    # a judge independent of the labels: standard PPI is wider than the labels alone, the tuned
    # lambda (PPI++) shrinks towards 0 and recovers (about) the labels' own interval
    f_bad, fu_bad = rng.random(200), rng.random(5000)
    bad = ppi_mean_ci(y_good, f_bad, fu_bad)
    tuned = ppi_mean_ci(y_good, f_bad, fu_bad, lam=None)
    assert bad.high - bad.low > labels_only[2] - labels_only[1]
    assert tuned.lam < 0.2
    assert tuned.high - tuned.low == pytest.approx(labels_only[2] - labels_only[1], rel=0.05)
    # the tuned lambda of the good judge is positive, and its coverage stays nominal
    assert ppi_mean_ci(y_good, f_good, fu_good, lam=None).lam > 0.5


def test_power_tuned_ci_covers_the_truth():
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(300):
        y, f, fu = simulate(rng, p=0.6)
        est = ppi_mean_ci(y, f, fu, lam=None)
        hits += est.low <= 0.6 <= est.high
    assert 0.91 <= hits / 300 <= 0.98
