"""rag_lab.fusion.weighted: per-query normalisation then a weighted sum, by formula."""

from __future__ import annotations

import statistics

import pytest

from rag_lab.fusion import WeightedFusion
from rag_lab.fusion.weighted import normalise

DENSE = {"q": {"a": 0.9, "b": 0.6, "c": 0.3}}
BM25 = {"q": {"c": 20.0, "d": 10.0, "a": 5.0}}
RUNS = {"dense": DENSE, "bm25": BM25}


def minmax(scores):
    lo, hi = min(scores.values()), max(scores.values())
    return {d: (s - lo) / (hi - lo) for d, s in scores.items()}


def zscore(scores):
    mu, sd = statistics.fmean(scores.values()), statistics.pstdev(scores.values())
    return {d: (s - mu) / sd for d, s in scores.items()}


def test_normalise_by_formula():
    s = {"a": 3.0, "b": 7.0, "c": 5.0, "d": -1.0}
    assert normalise(s, "minmax") == pytest.approx({"a": 0.5, "b": 1.0, "c": 0.75, "d": 0.0})
    assert normalise(s, "zscore") == pytest.approx(zscore(s))
    assert normalise({"a": 2.0, "b": 2.0}, "minmax") == {"a": 1.0, "b": 1.0}
    assert normalise({"a": 2.0, "b": 2.0}, "zscore") == {"a": 0.0, "b": 0.0}
    assert normalise({}, "minmax") == {}


def test_minmax_fusion_by_formula_and_floor_for_missing():
    out = WeightedFusion(normalization="minmax").fuse(RUNS, k=10)["q"]
    d, b = minmax(DENSE["q"]), minmax(BM25["q"])
    # "d" is missing from dense and "b" from bm25: they get that run's floor, 0 under min-max
    expected = {"a": d["a"] + b["a"], "b": d["b"] + 0.0, "c": d["c"] + b["c"], "d": 0.0 + b["d"]}
    assert out == pytest.approx(expected)


def test_zscore_fusion_floor_is_the_runs_lowest_normalised_score():
    w = {"dense": 0.7, "bm25": 0.3}
    out = WeightedFusion(weights=w, normalization="zscore").fuse(RUNS, k=10)["q"]
    d, b = zscore(DENSE["q"]), zscore(BM25["q"])
    fd, fb = min(d.values()), min(b.values())
    assert fd < 0 and fb < 0
    expected = {
        "a": 0.7 * d["a"] + 0.3 * b["a"],
        "b": 0.7 * d["b"] + 0.3 * fb,
        "c": 0.7 * d["c"] + 0.3 * b["c"],
        "d": 0.7 * fd + 0.3 * b["d"],
    }
    assert out == pytest.approx(expected)


def test_weights_change_the_winner():
    dense_heavy = WeightedFusion(weights={"dense": 0.9, "bm25": 0.1}).fuse(RUNS, k=10)["q"]
    bm25_heavy = WeightedFusion(weights={"dense": 0.1, "bm25": 0.9}).fuse(RUNS, k=10)["q"]
    assert next(iter(dense_heavy)) == "a"
    assert next(iter(bm25_heavy)) == "c"


def test_keeps_top_k_and_union_of_chunks():
    out = WeightedFusion().fuse(RUNS, k=10)["q"]
    assert set(out) == {"a", "b", "c", "d"}
    top2 = WeightedFusion().fuse(RUNS, k=2)["q"]
    assert list(top2) == list(out)[:2] and len(top2) == 2


def test_query_missing_from_one_run():
    out = WeightedFusion().fuse({"dense": DENSE, "bm25": {"other": {"z": 1.0}}}, k=10)
    assert out["q"] == pytest.approx(minmax(DENSE["q"]))
    assert out["other"] == {"z": 1.0}


def test_invalid_arguments_raise():
    with pytest.raises(ValueError, match="normalization"):
        WeightedFusion(normalization="softmax")
    with pytest.raises(ValueError, match="normalization"):
        normalise({"a": 1.0}, "rank")
    with pytest.raises(ValueError, match="sparse"):
        WeightedFusion(weights={"sparse": 1.0}).fuse(RUNS, k=10)
