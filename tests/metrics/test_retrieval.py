"""rag_lab.metrics.retrieval: per-query and mean metrics, cross-checked against ranx on random
runs with graded qrels, plus hand-computed cases (ties, noise ratio, unanswerable queries)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from rag_lab.metrics import (
    METRICS,
    mean_metrics,
    metric_key,
    parse_metric,
    query_metrics,
    ranked,
    run_metrics,
)

RANX_METRICS = [
    "hit_rate@1",
    "hit_rate@5",
    "hit_rate@10",
    "recall@5",
    "recall@10",
    "recall@100",
    "precision@5",
    "precision@10",
    "mrr@10",
    "ndcg@3",
    "ndcg@10",
    "map@100",
]
N_QUERIES = 300
N_DOCS = 400


def random_qrels(rng: random.Random) -> dict[str, dict[str, int]]:
    """1..12 judged-relevant documents per query, grades 1..3, plus 0..3 judged non-relevant
    (grade 0)."""
    qrels = {}
    for q in range(N_QUERIES):
        n_rel = rng.randint(1, 12)
        docs = rng.sample(range(N_DOCS), n_rel + rng.randint(0, 3))
        qrels[f"q{q:03d}"] = {
            f"d{d:03d}": rng.randint(1, 3) if i < n_rel else 0 for i, d in enumerate(docs)
        }
    return qrels


def random_run(rng: random.Random, qrels, integer_scores: bool) -> dict[str, dict[str, float]]:
    """1..150 retrieved documents per query; relevant documents are over-sampled so every metric
    sees hits at many ranks. Integer scores in 0..4 make ties the rule, not the exception."""
    run = {}
    for qid, grades in qrels.items():
        n = rng.randint(1, 150)
        pool = set(rng.sample(range(N_DOCS), n))
        docs = [f"d{d:03d}" for d in pool]
        docs += [d for d in grades if rng.random() < 0.6 and d not in docs]
        run[qid] = {d: float(rng.randint(0, 4)) if integer_scores else rng.random() for d in docs}
    return run


def tie_free(run):
    """rag_lab's documented order (descending score, ties by ascending id) encoded as distinct
    scores (score = -rank), so ranx's own sort cannot reorder anything."""
    out = {}
    for qid, scores in run.items():
        order = sorted(scores, key=lambda d: (-scores[d], d))
        out[qid] = {d: -float(i) for i, d in enumerate(order, 1)}
    return out


def ranx_per_query(ranx, qrels, run, metrics):
    Qrels, Run, evaluate = ranx.Qrels, ranx.Run, ranx.evaluate

    rx_run = Run(run)
    evaluate(Qrels(qrels), rx_run, metrics)
    return {m: dict(rx_run.scores[m]) for m in metrics}


def assert_matches_ranx(ours, theirs, metrics):
    assert set(ours) == set(theirs[metrics[0]])
    for m in metrics:
        for qid, per_query in ours.items():
            assert per_query[m] == pytest.approx(theirs[m][qid], abs=1e-9), (m, qid)


@pytest.fixture(scope="module")
def graded_qrels():
    return random_qrels(random.Random(1234))


def test_against_ranx_distinct_scores(ranx, graded_qrels):
    run = random_run(random.Random(99), graded_qrels, integer_scores=False)
    assert all(len(set(s.values())) == len(s) for s in run.values())  # no ties in this run
    ours = run_metrics(run, graded_qrels, RANX_METRICS)
    assert_matches_ranx(ours, ranx_per_query(ranx, graded_qrels, run, RANX_METRICS), RANX_METRICS)
    # the means are means of the per-query values (no NaN: every query has a relevant document)
    means = mean_metrics(ours, RANX_METRICS)
    for m in RANX_METRICS:
        assert means[m] == pytest.approx(np.mean([ours[q][m] for q in ours]), abs=1e-12)


def test_against_ranx_with_ties(ranx, graded_qrels):
    run = random_run(random.Random(7), graded_qrels, integer_scores=True)
    n_tied = sum(len(s) - len(set(s.values())) for s in run.values())
    assert n_tied > 1000  # ties everywhere
    ours = run_metrics(run, graded_qrels, RANX_METRICS)
    theirs = ranx_per_query(ranx, graded_qrels, tie_free(run), RANX_METRICS)
    assert_matches_ranx(ours, theirs, RANX_METRICS)


def test_ranked_is_descending_score_then_ascending_id():
    scores = {"b": 1.0, "a": 1.0, "c": 2.0, "d": 0.5, "aa": 1.0}
    assert ranked(scores) == ["c", "a", "aa", "b", "d"]


def test_tie_at_top_is_broken_by_ascending_id():
    # d1 and d2 tie at the top; the relevant one (d2) has the larger id, so it ranks second
    run = {"q": {"d2": 1.0, "d1": 1.0, "d3": 0.2}}
    names = ["mrr@10", "hit_rate@1", "hit_rate@2", "precision@2", "ndcg@10"]
    m = run_metrics(run, {"q": {"d2": 1}}, names)["q"]
    assert m["mrr@10"] == 0.5
    assert m["hit_rate@1"] == 0.0
    assert m["hit_rate@2"] == 1.0
    assert m["precision@2"] == 0.5
    assert m["ndcg@10"] == pytest.approx(1 / math.log2(3))


def test_ndcg_uses_linear_gain():
    grades = {"a": 3, "b": 1, "c": 2}
    m = query_metrics(["b", "x", "a", "c"], grades, ["ndcg@3", "ndcg@10"])
    dcg3 = 1 / math.log2(2) + 0 / math.log2(3) + 3 / math.log2(4)
    dcg10 = dcg3 + 2 / math.log2(5)
    idcg = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert m["ndcg@3"] == pytest.approx(dcg3 / idcg, abs=1e-12)
    assert m["ndcg@10"] == pytest.approx(dcg10 / idcg, abs=1e-12)
    exp_gain = (2**1 - 1 + (2**3 - 1) / 2) / (7 + 3 / math.log2(3) + 1 / 2)
    assert m["ndcg@3"] != pytest.approx(exp_gain)  # not the Burges (2^rel - 1) gain


def test_map_and_recall_by_formula():
    grades = {"a": 1, "b": 2, "c": 1, "z": 0}  # z is judged non-relevant
    ranking = ["a", "x", "b", "z", "y", "c"]
    m = query_metrics(
        ranking, grades, ["map@100", "map@3", "recall@3", "recall@100", "precision@5"]
    )
    assert m["map@100"] == pytest.approx((1 / 1 + 2 / 3 + 3 / 6) / 3)
    assert m["map@3"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert m["recall@3"] == pytest.approx(2 / 3)
    assert m["recall@100"] == 1.0
    assert m["precision@5"] == pytest.approx(2 / 5)


def test_noise_ratio_is_one_minus_precision_when_k_retrieved():
    rng = random.Random(5)
    for _ in range(200):
        grades = {f"d{i}": rng.randint(0, 3) for i in rng.sample(range(40), 8)}
        if not any(g > 0 for g in grades.values()):
            grades["d0"] = 1
        ranking = [f"d{i}" for i in rng.sample(range(40), rng.randint(10, 30))]
        m = query_metrics(
            ranking, grades, ["noise_ratio@5", "precision@5", "noise_ratio@10", "precision@10"]
        )
        assert m["noise_ratio@5"] == pytest.approx(1 - m["precision@5"])
        assert m["noise_ratio@10"] == pytest.approx(1 - m["precision@10"])


def test_noise_ratio_over_retrieved_units_when_fewer_than_k():
    m = query_metrics(["a", "b", "c"], {"b": 1, "q": 2}, ["noise_ratio@5", "precision@5"])
    assert m["noise_ratio@5"] == pytest.approx(2 / 3)
    assert m["precision@5"] == pytest.approx(1 / 5)  # precision keeps the nominal k
    assert math.isnan(query_metrics([], {"b": 1}, ["noise_ratio@5"])["noise_ratio@5"])


def test_unanswerable_query_ranking_metrics_nan_noise_one():
    names = [
        "hit_rate@5",
        "recall@5",
        "precision@5",
        "mrr@10",
        "ndcg@10",
        "map@100",
        "noise_ratio@5",
    ]
    m = query_metrics(["a", "b", "c"], {"a": 0, "b": 0}, names)
    assert m["noise_ratio@5"] == 1.0
    for name in names[:-1]:
        assert math.isnan(m[name]), name
    # a query with no judgments at all behaves the same
    m = query_metrics(["a"], {}, names)
    assert m["noise_ratio@5"] == 1.0 and math.isnan(m["ndcg@10"])


def test_open_set_scores_zero_for_hit_precision_mrr():
    names = [
        "hit_rate@5",
        "precision@5",
        "mrr@10",
        "recall@5",
        "ndcg@10",
        "map@100",
        "noise_ratio@5",
    ]
    m = query_metrics(["a", "b"], {}, names, open_set=True)
    assert m["hit_rate@5"] == 0.0 and m["precision@5"] == 0.0 and m["mrr@10"] == 0.0
    assert math.isnan(m["recall@5"]) and math.isnan(m["ndcg@10"]) and math.isnan(m["map@100"])
    assert m["noise_ratio@5"] == 1.0
    # with open_set=False the same query is NaN on those
    closed = query_metrics(["a", "b"], {}, names)
    assert all(math.isnan(closed[n]) for n in ("hit_rate@5", "precision@5", "mrr@10"))


def test_mean_skips_nan():
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 1.0}, "q3": {"x": 1.0}}
    qrels = {"q1": {"b": 1}, "q2": {"c": 1}, "q3": {"x": 0}}  # q3 is unanswerable
    per_query = run_metrics(run, qrels, ["mrr@10", "noise_ratio@5"])
    assert math.isnan(per_query["q3"]["mrr@10"])
    means = mean_metrics(per_query, ["mrr@10", "noise_ratio@5"])
    assert means["mrr@10"] == pytest.approx((0.5 + 1.0) / 2)
    assert means["noise_ratio@5"] == pytest.approx((1 / 2 + 0 + 1) / 3)
    assert math.isnan(mean_metrics({"q3": per_query["q3"]}, ["mrr@10"])["mrr@10"])


def test_query_missing_from_run_ranks_nothing():
    per_query = run_metrics({}, {"q": {"a": 1}}, ["hit_rate@5", "ndcg@10", "noise_ratio@5"])
    assert per_query["q"]["hit_rate@5"] == 0.0 and per_query["q"]["ndcg@10"] == 0.0
    assert math.isnan(per_query["q"]["noise_ratio@5"])


@pytest.mark.parametrize(
    "name",
    [
        "ndcg",
        "ndcg@",
        "@10",
        "NDCG@10",
        "foo@10",
        "ndcg@-1",
        "ndcg@1.5",
        "ndcg 10",
        "ndcg_at_10x",
        "ndcg@10x",
        "",
    ],
)
def test_parse_metric_rejects_bad_names(name):
    with pytest.raises(ValueError, match="unknown metric"):
        parse_metric(name)


@pytest.mark.parametrize("metric", METRICS)
def test_parse_metric_accepts_every_metric(metric):
    assert parse_metric(f"{metric}@25") == (metric, 25)
    assert parse_metric(f"{metric}_at_25") == (metric, 25)  # the logged form, as in metrics.json


def test_parse_metric_rejects_k_zero():
    with pytest.raises(ValueError):
        parse_metric("ndcg@0")


def test_metric_key():
    assert metric_key("ndcg@10") == "ndcg_at_10"
    assert metric_key("noise_ratio@5") == "noise_ratio_at_5"


def test_negative_grades_count_as_zero_gain():
    """Touché-style -2 judgments neither add relevance nor push nDCG below 0 (as ranx)."""
    from rag_lab.metrics import query_metrics

    grades = {"a": -2, "b": 1}
    got = query_metrics(["a", "b"], grades, ["ndcg@10", "hit_rate@1", "precision@2"])
    assert got["ndcg@10"] == pytest.approx(1 / math.log2(3))
    assert got["hit_rate@1"] == 0.0 and got["precision@2"] == 0.5
