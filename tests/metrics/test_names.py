"""rag_lab.metrics.names: the one normaliser of user-given metric names, the noise-ratio rule, the
floored sweep objective and which keys are counts."""

from __future__ import annotations

import math

import pytest

from rag_lab.metrics.names import (
    canonical_key,
    higher_is_better,
    is_count,
    is_floor_metric,
    is_noise,
    noise_refusal,
    objective_value,
)


@pytest.mark.parametrize(
    "given", ["ndcg@10", "ndcg_at_10", "NDCG@10", " nDCG@10 ", "NDCG_AT_10", "ndcg_at_10\n"]
)
def test_every_spelling_of_a_metric_is_one_key(given):
    assert canonical_key(given) == "ndcg_at_10"


def test_categories_keep_their_case_and_script():
    assert canonical_key("by_category/口语/NDCG@10") == "by_category/口语/ndcg_at_10"
    assert canonical_key("by_category/Manuals/hit_rate@5") == "by_category/Manuals/hit_rate_at_5"
    assert canonical_key("answer/faithfulness") == "answer/faithfulness"


def test_noise_and_floor_metrics_in_all_their_forms():
    for name in (
        "noise_ratio@5",
        "noise_ratio_at_10",
        "evidence_noise_ratio_at_1",
        "by_category/x/noise_ratio@5",
    ):
        assert is_noise(name) and not is_floor_metric(name)
    for name in ("hit_rate@5", "recall_at_100", "evidence_hit_rate_at_5", "Recall@10"):
        assert is_floor_metric(name) and not is_noise(name)
    for name in ("ndcg@10", "precision@5", "mrr@10", "empty_result_rate"):
        assert not is_floor_metric(name) and not is_noise(name)


def test_noise_alone_is_refused_with_what_to_add():
    msg = noise_refusal(["noise_ratio@10"], [], "--max-drop hit_rate_at_{k}=0.02")
    assert msg is not None and "\n" not in msg
    assert msg.startswith("noise_ratio@10 alone") and msg.endswith("--max-drop hit_rate_at_10=0.02")
    # an nDCG floor is not the pairing the rule asks for; a hit-rate or recall one is
    assert noise_refusal(["noise_ratio_at_5", "ndcg_at_10"], ["ndcg_at_10"], "x") is not None
    assert noise_refusal(["noise_ratio_at_5"], ["hit_rate@5"], "x") is None
    assert noise_refusal(["noise_ratio_at_5"], ["recall_at_100"], "x") is None
    assert noise_refusal(["ndcg@10"], [], "x") is None  # no noise: nothing to pair


def test_objective_value_without_floors_is_the_metric():
    metrics = {"ndcg_at_10": 0.7, "noise_ratio_at_5": 0.4, "hit_rate_at_5": 0.9}
    assert objective_value(metrics, "ndcg@10") == 0.7
    assert objective_value(metrics, "NDCG_at_10", {}) == 0.7
    assert objective_value(metrics, "map@100") is None
    assert math.isnan(objective_value({"ndcg_at_10": math.nan}, "ndcg@10"))


def test_a_job_below_a_floor_scores_worse_than_any_job_that_meets_it():
    broken = {"noise_ratio_at_5": 0.18, "hit_rate_at_5": 0.30}  # retrieves nothing for most
    right = {"noise_ratio_at_5": 0.80, "hit_rate_at_5": 0.95}
    worst_legit = {"noise_ratio_at_5": 1.0, "hit_rate_at_5": 0.80}
    floors = {"hit_rate@5": 0.8}
    # noise alone prefers the broken job; with the floor it loses to every job that meets it
    assert objective_value(broken, "noise_ratio@5") < objective_value(right, "noise_ratio@5")
    b = objective_value(broken, "noise_ratio@5", floors)
    assert b == pytest.approx(1.0 + (0.8 - 0.30))
    assert b > objective_value(right, "noise_ratio@5", floors)
    assert b > objective_value(worst_legit, "noise_ratio@5", floors) == 1.0
    assert not higher_is_better("noise_ratio@5")
    # higher is better: 0 - shortfall, below any value in [0, 1]
    assert objective_value(
        {"ndcg_at_10": 0.9, "recall_at_100": 0.5}, "ndcg@10", {"recall@100": 0.7}
    ) == pytest.approx(-0.2)
    # a floor metric that is missing or NaN counts from 0
    assert objective_value({"noise_ratio_at_5": 0.1}, "noise_ratio@5", floors) == pytest.approx(1.8)
    nan_floor = {"noise_ratio_at_5": 0.1, "hit_rate_at_5": math.nan}
    assert objective_value(nan_floor, "noise_ratio@5", floors) == pytest.approx(1.8)


def test_counts_are_recognised_by_key():
    counts = [
        "n_queries",
        "ingest/n_pages",
        "answer/n_judge_failures",
        "cache_hits",
        "cache_bytes_written",
        "cache/embeddings/misses",
        "misses_at_5/below_k",
        "evidence_misses_at_5/evidence_not_retrieved",
        "by_category/口语/misses_at_5/dropped_by/rules",
        "bm25/run_from_cache",
    ]
    rates = [
        "hit_rate_at_5",
        "empty_result_rate",
        "mean_retrieved_at_5",
        "by_category/x/mean_retrieved_at_5",
        "query_p50_ms",
        "cache_hit_rate",
        "answer/faithfulness",
    ]
    assert all(is_count(k) for k in counts)
    assert not any(is_count(k) for k in rates)


def test_evaluation_metrics_take_either_spelling_but_not_both():
    from rag_lab.errors import ConfigError
    from rag_lab.metrics.score import check_metric_names, score
    from rag_lab.types import Chunk

    check_metric_names(["ndcg_at_10", "hit_rate@5"])
    with pytest.raises(ConfigError, match="'ndcg_at_10' and 'ndcg@10' are one metric"):
        check_metric_names(["ndcg@10", "ndcg_at_10"])
    with pytest.raises(ConfigError, match="evaluation.metrics: unknown metric 'ndcg@ten'"):
        check_metric_names(["ndcg@ten"])
    chunks = {"a#0": Chunk("a#0", "a", "x", 0, 1), "b#0": Chunk("b#0", "b", "y", 0, 1)}
    run = {"q": {"b#0": 2.0, "a#0": 1.0}}
    flat, _ = score(run, chunks, {"q": {"a": 1}}, ["mrr_at_10", "hit_rate@1"])
    assert flat["mrr_at_10"] == 0.5 and flat["hit_rate_at_1"] == 0.0
