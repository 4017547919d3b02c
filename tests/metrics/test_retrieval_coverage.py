"""Queries with nothing retrieved: a miss in every ranking metric (as in ranx), skipped by noise
ratio, and shown by ``empty_result_rate`` and ``mean_retrieved_at_<k>`` beside it
(``rag_lab.metrics.score``)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rag_lab.metrics.score import score
from rag_lab.types import Chunk, Query

NAMES = ["hit_rate@5", "recall@10", "precision@5", "mrr@10", "ndcg@10", "map@100", "noise_ratio@5"]
RANX = [n for n in NAMES if not n.startswith("noise")]


def one_chunk_per_doc(docs):
    return {d: Chunk(d, d, f"text of {d}", 0, 10) for d in docs}


@pytest.fixture(scope="module")
def case():
    """120 answerable queries: a third missing from the run, a third with an empty result, the
    rest ranking 1..30 documents; plus 10 unanswerable queries (grade 0 only), half empty."""
    rng = random.Random(5)
    docs = [f"d{i:03d}" for i in range(200)]
    qrels, run = {}, {}
    for i in range(120):
        qid = f"q{i:03d}"
        rel = rng.sample(docs, rng.randint(1, 5))
        qrels[qid] = {d: rng.randint(1, 3) for d in rel}
        if i % 3 == 0:
            continue  # not in the run at all
        if i % 3 == 1:
            run[qid] = {}
            continue
        pool = rng.sample(docs, rng.randint(1, 30)) + [d for d in rel if rng.random() < 0.5]
        run[qid] = {d: rng.random() for d in dict.fromkeys(pool)}
    for i in range(10):
        qid = f"u{i}"
        qrels[qid] = {docs[i]: 0}
        run[qid] = {} if i % 2 else {docs[50 + i]: 1.0, docs[60 + i]: 0.5}
    queries = {q: Query(q, "", {"category": "a" if q < "q060" else "b"}) for q in qrels}
    return run, qrels, queries, one_chunk_per_doc(docs)


def test_nothing_retrieved_is_a_miss_as_in_ranx(ranx, case):
    Qrels, Run, ranx_evaluate = ranx.Qrels, ranx.Run, ranx.evaluate

    run, qrels, queries, chunks = case
    flat, table = score(run, chunks, qrels, NAMES, queries=queries)
    answerable = {q: g for q, g in qrels.items() if any(v > 0 for v in g.values())}
    # ranx scores a query with an empty result as 0 everywhere (rag_lab: a missing query too)
    rx_run = Run({q: run.get(q, {}) for q in answerable})
    theirs = ranx_evaluate(Qrels(answerable), rx_run, RANX)
    for name in RANX:
        key = name.replace("@", "_at_")
        assert flat[key] == pytest.approx(theirs[name], abs=1e-12), name
    empty = table["empty_result_rate"] == 1
    empty_answerable = table[table["query_id"].isin(answerable) & empty]
    assert len(empty_answerable) == 80
    assert (empty_answerable[[n.replace("@", "_at_") for n in RANX]] == 0).all().all()


def test_noise_skips_empty_results_and_the_coverage_metrics_show_them(case):
    run, qrels, queries, chunks = case
    flat, table = score(run, chunks, qrels, NAMES, queries=queries)
    n_docs = {q: len(run.get(q, {})) for q in qrels}
    assert flat["empty_result_rate"] == pytest.approx(np.mean([n == 0 for n in n_docs.values()]))
    assert flat["empty_result_rate"] == pytest.approx((80 + 5) / 130)
    assert flat["mean_retrieved_at_5"] == pytest.approx(
        np.mean([min(n, 5) for n in n_docs.values()])
    )
    # noise is the mean over the queries that retrieved something, only
    noisy = []
    for q, n in n_docs.items():
        if n:
            top = sorted(run[q], key=lambda d: (-run[q][d], d))[:5]
            noisy.append(sum(qrels[q].get(d, 0) <= 0 for d in top) / len(top))
    assert len(noisy) == 45 and flat["noise_ratio_at_5"] == pytest.approx(np.mean(noisy))
    assert table["noise_ratio_at_5"].isna().sum() == 85
    # per query and per category, under the same names as the flat means
    assert list(table["mean_retrieved_at_5"]) == [min(n_docs[q], 5) for q in table["query_id"]]
    assert table["empty_result_rate"].mean() == pytest.approx(flat["empty_result_rate"])
    in_a = [q for q in qrels if q < "q060"]
    assert flat["by_category/a/empty_result_rate"] == pytest.approx(
        np.mean([n_docs[q] == 0 for q in in_a])
    )
    assert "by_category/a/mean_retrieved_at_5" in flat


def test_evidence_metrics_count_a_query_the_run_lacks_as_a_miss():
    chunks = {"d1#0": Chunk("d1#0", "d1", "oil above 70 °C stops the pump", 0, 30)}
    queries = {
        "q1": Query("q1", "oil?", {"answers": ["70 °C"]}),
        "q2": Query("q2", "oil again?", {"answers": ["70 °C"]}),
    }
    qrels = {"q1": {"d1": 1}, "q2": {"d1": 1}}
    flat, table = score({"q1": {"d1#0": 1.0}}, chunks, qrels, ["hit_rate@5"], queries=queries)
    assert flat["evidence_hit_rate_at_5"] == 0.5  # q2 retrieved nothing: a miss, not skipped
    assert flat["hit_rate_at_5"] == 0.5 and flat["empty_result_rate"] == 0.5
    assert list(table["evidence_hit_rate_at_5"]) == [1.0, 0.0]
