"""rag_lab.fusion.rrf: reciprocal rank fusion by formula."""

from __future__ import annotations

import pytest

from rag_lab.fusion import RRFFusion

RUNS = {
    "dense": {"q1": {"a": 0.9, "b": 0.8, "c": 0.1}, "q2": {"x": 1.0}},
    "bm25": {"q1": {"c": 12.0, "a": 3.0, "d": 1.0}},
}


def test_rrf_scores_by_formula():
    k = 60.0
    out = RRFFusion(k=k).fuse(RUNS, k=10)
    assert out["q1"] == pytest.approx(
        {
            "a": 1 / (k + 1) + 1 / (k + 2),
            "b": 1 / (k + 2),
            "c": 1 / (k + 3) + 1 / (k + 1),
            "d": 1 / (k + 3),
        }
    )
    # q2 is only in one run: it is still fused, from that run alone
    assert out["q2"] == pytest.approx({"x": 1 / (k + 1)})
    assert list(out["q1"]) == ["a", "c", "b", "d"]  # descending fused score


def test_rrf_ties_ranked_by_id_within_a_run():
    out = RRFFusion(k=0).fuse({"r": {"q": {"b": 1.0, "a": 1.0}}, "s": {"q": {}}}, k=5)
    assert out["q"] == pytest.approx({"a": 1.0, "b": 0.5})


def test_rrf_weights_keyed_by_retriever_name():
    k = 10.0
    w = {"dense": 0.25, "bm25": 2.0}
    out = RRFFusion(k=k, weights=w).fuse(RUNS, k=10)
    assert out["q1"]["a"] == pytest.approx(0.25 / (k + 1) + 2.0 / (k + 2))
    assert out["q1"]["c"] == pytest.approx(0.25 / (k + 3) + 2.0 / (k + 1))
    assert out["q1"]["b"] == pytest.approx(0.25 / (k + 2))
    assert next(iter(out["q1"])) == "c"  # the bm25 weight makes bm25's top document win
    # a missing name weighs 1
    out = RRFFusion(k=k, weights={"bm25": 3.0}).fuse(RUNS, k=10)
    assert out["q1"]["b"] == pytest.approx(1 / (k + 2))


def test_rrf_unknown_weight_name_raises():
    with pytest.raises(ValueError, match="sparse"):
        RRFFusion(weights={"sparse": 1.0}).fuse(RUNS, k=10)


def test_rrf_keeps_top_k():
    out = RRFFusion().fuse(RUNS, k=2)
    assert list(out["q1"]) == ["a", "c"]
    assert len(RRFFusion().fuse(RUNS, k=1)["q1"]) == 1


def test_rrf_larger_k_flattens_the_head():
    sharp = RRFFusion(k=1).fuse(RUNS, k=10)["q1"]
    flat = RRFFusion(k=1000).fuse(RUNS, k=10)["q1"]
    assert sharp["a"] / sharp["d"] > flat["a"] / flat["d"]


def test_rrf_does_not_mutate_inputs():
    before = {n: {q: dict(s) for q, s in r.items()} for n, r in RUNS.items()}
    RRFFusion().fuse(RUNS, k=1)
    assert RUNS == before
