"""``run_metrics`` scores all queries at once: its values must be bit-for-bit those of
``query_metrics`` on each query's ``ranked`` list (the per-query definition), and agree with
ranx."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rag_lab.metrics import mean_metrics, query_metrics, ranked, run_metrics

NAMES = [
    "hit_rate@1",
    "hit_rate@10",
    "recall@5",
    "recall@100",
    "precision@3",
    "precision@10",
    "noise_ratio@5",
    "noise_ratio@10",
    "mrr@10",
    "ndcg@3",
    "ndcg@10",
    "ndcg@100",
    "map@10",
    "map@100",
]


def case(seed: int, n_queries: int = 400, fractional: bool = False):
    """Runs of 0..120 documents with two-decimal scores (ties everywhere), 0..15 judged
    documents (many relevant ones retrieved high, so rows with > 2 hits in the top 10 occur),
    negative and zero grades, queries missing from the run and runs for queries not judged."""
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    for i in range(n_queries):
        n = int(rng.integers(0, 121))
        docs = [f"d{d}" for d in rng.choice(500, size=n, replace=False)]
        scores = np.round(rng.normal(size=n), 2 if i % 2 else 1)
        if i % 11 != 0:  # every 11th judged query is missing from the run
            run[f"q{i}"] = {d: float(s) for d, s in zip(docs, scores)}
        top = ranked(run.get(f"q{i}", {}))
        judged = top[: int(rng.integers(0, 8))] + [f"d{d}" for d in rng.integers(0, 500, 8)]
        grades = {}
        for d in judged[: int(rng.integers(0, 16))]:
            g = int(rng.integers(-1, 4))
            grades[d] = g + 0.5 if fractional and g > 0 else g
        qrels[f"q{i}"] = grades
    run["unjudged"] = {"d1": 1.0}
    return run, qrels


def per_query(run, qrels, names, open_set=False):
    return {q: query_metrics(ranked(run.get(q, {})), g, names, open_set) for q, g in qrels.items()}


def assert_identical(a, b):
    assert list(a) == list(b)
    for q in b:
        assert list(a[q]) == list(b[q])
        for n, v in b[q].items():
            w = a[q][n]
            assert (math.isnan(v) and math.isnan(w)) or v == w, (q, n, w, v)  # exactly equal


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("open_set", [False, True])
def test_bit_for_bit_the_per_query_definition(seed, open_set):
    run, qrels = case(seed, fractional=seed == 2)
    fast = run_metrics(run, qrels, NAMES, open_set)
    assert_identical(fast, per_query(run, qrels, NAMES, open_set))
    hits_top10 = [sum(v[n] > 0 for n in ["recall@5"]) for v in fast.values()]
    assert any(hits_top10)
    many = sum(
        1
        for q, g in qrels.items()
        if sum(1 for d in ranked(run.get(q, {}))[:10] if g.get(d, 0) > 0) > 2
    )
    assert many > 5  # the exact-summation path for rows with more than two hits is exercised
    means = mean_metrics(fast, NAMES)
    ref = per_query(run, qrels, NAMES, open_set)
    for n in NAMES:
        vals = [v[n] for v in ref.values() if not math.isnan(v[n])]
        assert means[n] == float(np.mean(vals))


def test_nan_scores_take_the_per_query_path():
    run = {"q": {"a": float("nan"), "b": 1.0, "c": 0.5}}
    qrels = {"q": {"c": 1}}
    assert_identical(run_metrics(run, qrels, NAMES), per_query(run, qrels, NAMES))


def test_degenerate_inputs():
    assert run_metrics({}, {}, NAMES) == {}
    assert run_metrics({"q": {"a": 1.0}}, {"q": {"a": 1}}, []) == {"q": {}}
    out = run_metrics({}, {"q": {"a": 1}, "u": {}}, ["ndcg@10", "noise_ratio@5", "hit_rate@1"])
    assert out["q"]["ndcg@10"] == 0.0 and out["q"]["hit_rate@1"] == 0.0
    assert math.isnan(out["q"]["noise_ratio@5"]) and math.isnan(out["u"]["ndcg@10"])


def test_agrees_with_ranx_on_a_random_case(ranx):
    Qrels, Run, evaluate = ranx.Qrels, ranx.Run, ranx.evaluate

    run, qrels = case(5)
    answerable = {q: g for q, g in qrels.items() if any(v > 0 for v in g.values())}
    names = [n for n in NAMES if not n.startswith("noise_ratio")]
    ours = mean_metrics(run_metrics(run, answerable, names), names)
    rq = Qrels({q: {d: max(v, 0) for d, v in g.items()} for q, g in answerable.items()})
    # ranx breaks ties its own way: hand it rag_lab's order as distinct scores (-rank)
    rr = Run(
        {
            q: {d: -float(i) for i, d in enumerate(ranked(run[q]), 1)}
            for q in answerable
            if run.get(q)
        }
    )
    theirs = evaluate(rq, rr, names, make_comparable=True)
    for n in names:
        assert ours[n] == pytest.approx(theirs[n], abs=1e-9), n
