"""Per-query retrieval rows (``query_runs``): a query set that grows by one searches one query,
and the run equals the one computed from scratch."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.pipeline import Pipeline
from rag_lab.pipeline.build import build_dataset, build_pipeline
from tests.compose import TOY_OVERRIDES, compose_evaluate


def pipeline(tmp_path: Path, cache: Path | None) -> tuple[Pipeline, dict[str, str]]:
    cfg = compose_evaluate(
        [
            *TOY_OVERRIDES,
            "retrievers=[dense,bm25]",
            "tracking=none",
            f"cache.dir={cache}" if cache else "cache.dir=null",
        ],
        tmp_path,
    )
    data = build_dataset(cfg).load()
    pipe = build_pipeline(cfg)
    pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    return pipe, {q: x.text for q, x in data.queries.items()}


def spy(pipe: Pipeline) -> dict[str, list[list[str]]]:
    """Record the query ids each retriever is asked to search, batch by batch."""
    calls: dict[str, list[list[str]]] = {}
    for name, retriever in pipe.retrievers.items():
        original = retriever.retrieve

        def retrieve(queries, k, _name=name, _original=original):
            calls.setdefault(_name, []).append(list(queries))
            return _original(queries, k)

        retriever.retrieve = retrieve  # type: ignore[method-assign]
    return calls


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


def test_an_added_query_is_the_only_one_searched(tmp_path, cache):
    pipe, queries = pipeline(tmp_path, cache)
    *first, added = list(queries)
    pipe.run({q: queries[q] for q in first}, 10, latency_queries=2)

    again, _ = pipeline(tmp_path, cache)  # a later job: new pipeline, same cache
    calls = spy(again)
    result = again.run(queries, 10, latency_queries=2)
    # one batch with the new query; the timed queries' latencies were recorded the first time
    assert calls == {"dense": [[added]], "bm25": [[added]]}
    assert dict(result.from_cache) == {"dense": False, "bm25": False}
    assert len(result.latency_ms) == 2

    scratch, _ = pipeline(tmp_path / "scratch", None)
    expected = scratch.run(queries, 10, latency_queries=2)
    assert result.runs["dense"] == expected.runs["dense"]
    assert result.runs["bm25"] == expected.runs["bm25"]
    assert result.final == expected.final
    assert list(result.final) == list(queries)  # in the queries' order


def test_a_subset_of_known_queries_searches_nothing(tmp_path, cache):
    pipe, queries = pipeline(tmp_path, cache)
    full = pipe.run(queries, 10, latency_queries=0)
    subset = dict(list(queries.items())[::2])
    again, _ = pipeline(tmp_path, cache)
    calls = spy(again)
    result = again.run(subset, 10, latency_queries=0)
    assert calls == {}
    assert dict(result.from_cache) == {"dense": True, "bm25": True}
    assert result.runs["bm25"] == {q: full.runs["bm25"][q] for q in subset}


def test_a_newly_timed_query_is_timed_and_nothing_is_searched_twice(tmp_path, cache):
    pipe, queries = pipeline(tmp_path, cache)
    pipe.run(queries, 10, latency_queries=0)
    again, _ = pipeline(tmp_path, cache)
    calls = spy(again)
    result = again.run(queries, 10, latency_queries=2)
    first_two = [[q] for q in list(queries)[:2]]
    assert calls == {"dense": first_two, "bm25": first_two}  # timing runs only
    assert len(result.latency_ms) == 2 and all(ms > 0 for ms in result.latency_ms)


def test_another_depth_shares_no_rows(tmp_path, cache):
    pipe, queries = pipeline(tmp_path, cache)
    pipe.run(queries, 10)
    again, _ = pipeline(tmp_path, cache)
    calls = spy(again)
    again.run(queries, 5)
    assert calls["bm25"] == [list(queries)]
