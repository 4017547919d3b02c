"""rag_lab.analysis.stats: bootstrap CIs and the sign-flip test, cross-checked against scipy.stats
(bootstrap, permutation_test) on fixed samples, plus coverage, NaN handling and determinism."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rag_lab.analysis.stats import (
    align,
    paired_bootstrap_ci,
    paired_bootstrap_diff_ci,
    randomization_test,
)


def test_constant_sample_gives_degenerate_ci() -> None:
    assert paired_bootstrap_ci(np.full(40, 0.7)) == (0.7, 0.7, 0.7)
    assert paired_bootstrap_diff_ci(np.full(10, 0.5), np.full(10, 0.25)) == (0.25, 0.25, 0.25)


def test_ci_matches_scipy_percentile_bootstrap() -> None:
    from scipy import stats as sps  # in the test: scipy.stats costs ~1.5 CPU-s to import

    x = np.random.default_rng(1).gamma(2.0, 0.2, size=80)
    mean, low, high = paired_bootstrap_ci(x, n_resamples=20000, seed=3)
    ref = sps.bootstrap(
        (x,),
        np.mean,
        n_resamples=20000,
        method="percentile",
        paired=True,
        random_state=np.random.default_rng(4),
    ).confidence_interval
    width = ref.high - ref.low
    assert mean == pytest.approx(x.mean())
    # two independent 20k-resample estimates of the same percentiles: a few % of the width apart
    assert low == pytest.approx(ref.low, abs=0.05 * width)
    assert high == pytest.approx(ref.high, abs=0.05 * width)


def test_diff_ci_matches_scipy_paired_bootstrap() -> None:
    from scipy import stats as sps  # in the test: scipy.stats costs ~1.5 CPU-s to import

    rng = np.random.default_rng(2)
    base = rng.random(60)
    a, b = base + rng.normal(0.05, 0.1, 60), base
    mean, low, high = paired_bootstrap_diff_ci(a, b, n_resamples=20000, seed=5)
    ref = sps.bootstrap(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        n_resamples=20000,
        method="percentile",
        paired=True,
        vectorized=True,
        random_state=np.random.default_rng(6),
    ).confidence_interval
    width = ref.high - ref.low
    assert mean == pytest.approx(np.mean(a - b))
    assert low == pytest.approx(ref.low, abs=0.05 * width)
    assert high == pytest.approx(ref.high, abs=0.05 * width)
    # pairing matters: the paired CI is far narrower than the spread of either side alone
    assert high - low < 0.5 * (paired_bootstrap_ci(a)[2] - paired_bootstrap_ci(a)[1])


def test_ci_coverage_on_normal_samples() -> None:
    rng = np.random.default_rng(7)
    true_mean, hits, n_sims = 0.3, 0, 100
    for i in range(n_sims):
        _, low, high = paired_bootstrap_ci(rng.normal(true_mean, 1.0, 40), n_resamples=1000, seed=i)
        hits += low <= true_mean <= high
    # percentile bootstrap undercovers slightly at n=40 (~0.93 for a nominal 0.95)
    assert 0.88 <= hits / n_sims <= 0.99


def test_randomization_matches_scipy_permutation_test() -> None:
    from scipy import stats as sps  # in the test: scipy.stats costs ~1.5 CPU-s to import

    rng = np.random.default_rng(8)
    base = rng.random(40)
    a, b = base + rng.normal(0.015, 0.1, 40), base
    p = randomization_test(a, b, n_permutations=20000, seed=9)
    ref = sps.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        vectorized=True,
        permutation_type="samples",
        alternative="two-sided",
        n_resamples=20000,
        random_state=np.random.default_rng(10),
    ).pvalue
    assert 0.05 < ref < 0.5  # a sample where the p-value is neither saturated nor trivially small
    assert p == pytest.approx(ref, abs=0.02)


def test_large_difference_is_significant() -> None:
    rng = np.random.default_rng(11)
    b = rng.random(50)
    assert randomization_test(b + 0.2 + rng.normal(0, 0.05, 50), b, n_permutations=2000) < 0.01
    # the +1 correction: never below 1 / (n_permutations + 1)
    assert randomization_test(b + 1.0, b, n_permutations=999) == pytest.approx(1 / 1000)


def test_identical_inputs_give_p_one() -> None:
    x = np.random.default_rng(12).random(30)
    assert randomization_test(x, x.copy()) == 1.0


def test_nan_pairs_are_dropped() -> None:
    a = np.array([0.9, np.nan, 0.8, 0.7, 1.0, np.nan])
    b = np.array([0.1, 0.5, np.nan, 0.2, 0.3, np.nan])
    keep = np.isfinite(a) & np.isfinite(b)
    assert paired_bootstrap_ci(a)[0] == pytest.approx(np.nanmean(a))
    assert paired_bootstrap_diff_ci(a, b, seed=1) == paired_bootstrap_diff_ci(
        a[keep], b[keep], seed=1
    )
    assert randomization_test(a, b, seed=1) == randomization_test(a[keep], b[keep], seed=1)
    assert all(math.isnan(v) for v in paired_bootstrap_ci(np.array([np.nan, np.nan])))
    assert math.isnan(randomization_test(np.array([np.nan]), np.array([1.0])))


def test_unpaired_lengths_are_rejected() -> None:
    with pytest.raises(ValueError, match="same length"):
        randomization_test(np.zeros(3), np.zeros(4))


def test_seed_determinism() -> None:
    rng = np.random.default_rng(13)
    a, b = rng.random(100), rng.random(100)
    assert paired_bootstrap_ci(a, seed=4) == paired_bootstrap_ci(a, seed=4)
    assert paired_bootstrap_diff_ci(a, b, seed=4) == paired_bootstrap_diff_ci(a, b, seed=4)
    assert randomization_test(a, b, seed=4) == randomization_test(a, b, seed=4)
    assert paired_bootstrap_ci(a, seed=4) != paired_bootstrap_ci(a, seed=5)


def test_chunked_draws_match_a_single_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunking only bounds memory; forcing tiny chunks must not change the answer's scale."""
    import rag_lab.analysis.stats as st

    rng = np.random.default_rng(14)
    a, b = rng.random(64), rng.random(64) - 0.05
    big = (
        st.randomization_test(a, b, n_permutations=4000, seed=0),
        st.paired_bootstrap_ci(a, seed=0),
    )
    monkeypatch.setattr(st, "_CHUNK_ELEMENTS", 64 * 7)  # 7 rows per block, 572 blocks
    small = (
        st.randomization_test(a, b, n_permutations=4000, seed=0),
        st.paired_bootstrap_ci(a, seed=0),
    )
    assert small[0] == pytest.approx(big[0], abs=0.03)
    assert small[1][1:] == pytest.approx(big[1][1:], abs=0.02)


def test_align_inner_joins_on_query_id() -> None:
    x = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "ndcg_at_10": [0.1, np.nan, 0.3]})
    y = pd.DataFrame({"query_id": ["q3", "q1", "q4"], "ndcg_at_10": [0.6, 0.4, 0.9]})
    wide = align({"x": x, "y": y}, "ndcg_at_10")
    assert list(wide.columns) == ["x", "y"]
    assert sorted(wide.index) == ["q1", "q3"]
    assert wide.loc["q3"].tolist() == [0.3, 0.6]
    with pytest.raises(KeyError, match="mrr_at_10"):
        align({"x": x}, "mrr_at_10")
    with pytest.raises(ValueError, match="duplicate"):
        align({"x": pd.concat([x, x])}, "ndcg_at_10")
