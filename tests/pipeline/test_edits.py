"""Edits cost their size: an edited corpus updates the earlier BM25 and dense indexes in place
and carries over the per-query rows the edit provably leaves exact; the run equals the one
computed from scratch on the edited corpus."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from rag_lab.pipeline import Pipeline
from rag_lab.pipeline.build import build_dataset, build_pipeline
from tests.compose import compose_evaluate

WORDS = [f"w{i}" for i in range(400)]


def write_corpus(folder: Path, docs: dict[str, str], queries: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for d, text in docs.items():
            fh.write(json.dumps({"_id": d, "title": "", "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as fh:
        for q, text in queries.items():
            fh.write(json.dumps({"_id": q, "text": text}) + "\n")
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\td{i % len(docs)}\t1\n" for i, q in enumerate(queries)
    )
    (folder / "qrels" / "test.tsv").write_text(qrels)


def corpus(seed: int = 7) -> tuple[dict[str, str], dict[str, str]]:
    rng = random.Random(seed)
    # Zipf-like word choice: common words in many documents, rare ones in a few
    weights = [1 / (i + 1) for i in range(len(WORDS))]
    docs = {
        f"d{i}": " ".join(rng.choices(WORDS, weights, k=rng.randint(5, 60))) for i in range(300)
    }
    queries = {
        f"q{i}": " ".join(rng.choices(WORDS, weights, k=rng.randint(1, 6))) for i in range(80)
    }
    return docs, queries


def hybrid(data: Path, cache: Path | None) -> list[str]:
    """The edit tests' pipeline: hybrid BM25 + hashing dense, RRF, over the BEIR folder ``data``."""
    return [
        "dataset=beir",
        f"dataset.path={data}",
        "embedder=hashing",
        "retrievers=[bm25,dense]",
        "fusion=rrf",
        "tracking=none",
        f"cache.dir={cache}" if cache else "cache.dir=null",
    ]


def pipeline(data: Path, tmp_path: Path, cache: Path | None, *extra: str) -> Pipeline:
    cfg = compose_evaluate([*extra, *hybrid(data, cache)], tmp_path)
    loaded = build_dataset(cfg).load()
    pipe = build_pipeline(cfg)
    pipe.load_corpus(loaded.corpus_sources, loaded.corpus_root, loaded.corpus_fingerprint)
    return pipe


@pytest.mark.parametrize("k", [10, 400])
def test_an_edit_updates_indexes_in_place_and_equals_a_run_from_scratch(tmp_path, k):
    docs, queries = corpus()
    data, cache = tmp_path / "data", tmp_path / "cache"
    write_corpus(data, docs, queries)
    pipeline(data, tmp_path, cache).run(queries, k, latency_queries=5)

    # one document edited, one removed, one added
    docs["d17"] = "w1 w2 w3 w399 w398 " + docs["d17"]
    del docs["d40"]
    docs["d900"] = "w5 w6 w7 w8 w9 w10 w11 w12 w380"
    write_corpus(data, docs, queries)
    pipe = pipeline(data, tmp_path, cache)
    edited = pipe.run(queries, k, latency_queries=5)
    assert pipe.indexes.updated_from.keys() == {"bm25", "dense"}
    stats = edited.stats
    for name in ("bm25", "dense"):
        assert stats[f"cache/{name}/n_carried"] + stats[f"cache/{name}/n_searched"] == len(queries)
    if k == 10:  # most rows stand: only the queries the edit can reach are searched
        assert stats["cache/dense/n_carried"] > len(queries) / 2
        assert stats["cache/bm25/n_carried"] > len(queries) / 2
    else:  # rows hold every chunk that scores (the corpus is smaller than k): all carried
        assert stats["cache/bm25/n_searched"] == 0

    scratch = pipeline(data, tmp_path / "scratch", None).run(queries, k, latency_queries=0)
    assert edited.runs["bm25"] == scratch.runs["bm25"]  # scores bit for bit
    for q in queries:
        assert list(edited.runs["dense"][q]) == list(scratch.runs["dense"][q])
        np.testing.assert_allclose(
            list(edited.runs["dense"][q].values()),
            list(scratch.runs["dense"][q].values()),
            rtol=1e-6,
        )
    assert {q: list(r) for q, r in edited.final.items()} == {
        q: list(r) for q, r in scratch.final.items()
    }

    # a second edit carries over the rows the first one carried or searched
    docs["d3"] = docs["d3"] + " w250"
    write_corpus(data, docs, queries)
    again = pipeline(data, tmp_path, cache).run(queries, k, latency_queries=5)
    scratch = pipeline(data, tmp_path / "scratch2", None).run(queries, k, latency_queries=0)
    assert again.runs["bm25"] == scratch.runs["bm25"]
    assert again.stats["cache/bm25/n_carried"] > 0


def test_the_updated_bm25_index_scores_as_one_built_from_scratch(tmp_path):
    docs, queries = corpus(seed=3)
    data, cache = tmp_path / "data", tmp_path / "cache"
    write_corpus(data, docs, queries)
    pipeline(data, tmp_path, cache).index_all()
    docs["d0"] = "w0 w0 w0 w1"
    docs["d299"] = "w7 w399 brandnew"
    del docs["d150"]
    write_corpus(data, docs, queries)
    updated = pipeline(data, tmp_path, cache)
    updated.index_all()
    assert updated.indexes.updated_from.keys() == {"bm25", "dense"}
    scratch = pipeline(data, tmp_path / "s", None)
    scratch.index_all()
    a, b = updated.retrievers["bm25"], scratch.retrievers["bm25"]
    assert a.chunk_ids == b.chunk_ids
    tokens = a.tokenizer(list(queries.values()) + ["brandnew w399"])
    for t in tokens:
        assert np.array_equal(a._engine.get_scores(t), b._engine.get_scores(t))


def test_an_edited_chunk_set_is_stored_as_its_edit_and_read_back_whole(tmp_path):
    import gzip

    from rag_lab.cache import store

    docs, queries = corpus(seed=5)
    data, cache = tmp_path / "data", tmp_path / "cache"
    write_corpus(data, docs, queries)
    first = pipeline(data, tmp_path, cache)
    for n in range(3):  # three edits in a row: each entry is the edit of the one before
        docs[f"d{n}"] = f"w{n} w399 " + docs[f"d{n}"]
        write_corpus(data, docs, queries)
        edited = pipeline(data, tmp_path, cache)
        assert edited.chunks_key != first.chunks_key
        entry = json.loads(
            gzip.decompress(edited.cache.path("chunks", edited.chunks_key, "json.gz").read_bytes())
        )
        assert entry["format"] == 3 and len(entry["columns"]["chunk_id"]) == 1
        assert edited.corpus_counts["cache/corpus/n_checked_documents"] == 1
    entries = [
        json.loads(gzip.decompress(p.read_bytes()))
        for p in (cache / "documents").rglob("*.json.gz")
    ]
    assert sum(bool(e.get("base")) for e in entries) == 3  # each edit's documents entry: its edit
    assert all(len(e["documents"]) == 1 for e in entries if e.get("base"))
    store._DECODED.clear()  # a new process: the entry is read through its chain
    again = pipeline(data, tmp_path, cache)
    assert again.corpus_counts["cache/corpus/n_parsed_files"] == 0
    assert list(again.chunks.values()) == list(edited.chunks.values())
    scratch = pipeline(data, tmp_path / "s", None)
    assert list(again.chunks.values()) == list(scratch.chunks.values())

    def untimed(report: dict) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in report["documents"]]

    assert untimed(again.ingest) == untimed(scratch.ingest)
    # the documents entry is stored as its edit too: another chunker reads it back whole
    rechunked = pipeline(
        data, tmp_path, cache, "chunker=fixed_size", "chunker.size=20", "chunker.overlap=5"
    )
    assert rechunked.corpus_counts["cache/corpus/n_parsed_files"] == 0  # documents read back
    expected = pipeline(
        data, tmp_path / "s2", None, "chunker=fixed_size", "chunker.size=20", "chunker.overlap=5"
    )
    assert list(rechunked.chunks.values()) == list(expected.chunks.values())


def test_retrieve_seconds_leave_out_the_indexing_a_run_triggers(tmp_path, monkeypatch):
    """A retriever indexed lazily inside ``run`` reports that time once, as its
    ``index_seconds``: the run's retrieval seconds (``retrieve_seconds``) do not hold it again
    (the stage work that bench_edit.py sums counted it twice)."""
    import time

    docs, queries = corpus(seed=5)
    data = tmp_path / "data"
    write_corpus(data, docs, queries)
    pipe = pipeline(data, tmp_path, None)
    bm25 = pipe.retrievers["bm25"]
    index = bm25.index

    def slow_index(chunks):  # type: ignore[no-untyped-def]
        time.sleep(1.0)
        index(chunks)

    monkeypatch.setattr(bm25, "index", slow_index)
    result = pipe.run(queries, 10)
    assert pipe.timings["bm25/index_seconds"] >= 1.0
    assert result.seconds["bm25"] < 1.0  # 80 queries over 300 chunks: milliseconds
    assert result.seconds["bm25"] >= 0.0


def test_an_edit_reports_what_it_recomputed_in_the_run_metrics(tmp_path):
    """metrics.json (``evaluate``'s metrics) says what an edit of one record recomputed: one
    record of the JSON-lines file parsed (documents counted, not only files), one document
    checked and tagged, one chunk updated in each index, every query's row carried or searched;
    the metrics equal a run from scratch on the edited corpus."""
    from rag_lab.evaluate import evaluate

    docs, queries = corpus(seed=11)
    data = tmp_path / "data"
    write_corpus(data, docs, queries)

    def run(cache: Path, where: str) -> dict:
        return evaluate(compose_evaluate(hybrid(data, cache), tmp_path / where))

    cold = run(tmp_path / "cache", "cold")
    assert cold["cache/corpus/n_parsed_documents"] == len(docs)
    docs["d42"] = "w3 w7 w399 " + docs["d42"]
    write_corpus(data, docs, queries)
    edited = run(tmp_path / "cache", "edit")
    assert edited["cache/corpus/n_parsed_files"] == 1
    assert edited["cache/corpus/n_parsed_documents"] == 1  # the edited record, not its file
    assert edited["cache/corpus/n_checked_documents"] == 1
    assert edited["cache/corpus/n_tagged_chunks"] == 1
    assert edited["bm25/updated_chunks"] == edited["dense/updated_chunks"] == 1
    for name in ("bm25", "dense"):
        done = edited[f"cache/{name}/n_carried"] + edited[f"cache/{name}/n_searched"]
        assert done == edited["n_queries"]
    assert edited["cache/bm25/n_carried"] > 0 and edited["cache/dense/n_carried"] > 0
    scratch = run(tmp_path / "scratch_cache", "scratch")
    for key in ("ndcg_at_10", "recall_at_100", "mrr_at_10", "map_at_100"):
        assert round(edited[key], 4) == round(scratch[key], 4)


def test_an_edit_of_a_few_records_parses_those_records_only(tmp_path):
    """An edited, an added and a removed record of a JSON-lines file: only the two new records
    are parsed, and the chunks equal a read from scratch. What the record splice cannot vouch
    for is read whole as before: a repeated id is refused naming both lines, a file with
    CR LF line breaks is parsed whole."""
    from rag_lab.errors import DataError

    docs, queries = corpus(seed=13)
    data, cache = tmp_path / "data", tmp_path / "cache"
    write_corpus(data, docs, queries)
    pipeline(data, tmp_path, cache)
    docs["d7"] = "w9 w8 " + docs["d7"]
    del docs["d100"]
    docs["d901"] = "w1 w2 w3"
    write_corpus(data, docs, queries)
    edited = pipeline(data, tmp_path, cache)
    assert edited.corpus_counts["cache/corpus/n_parsed_documents"] == 2
    assert edited.corpus_counts["cache/corpus/n_checked_documents"] == 2
    scratch = pipeline(data, tmp_path / "s", None)
    assert list(edited.chunks.values()) == list(scratch.chunks.values())

    corpus_file = data / "corpus.jsonl"
    lines = corpus_file.read_text().splitlines()
    twice = [*lines, lines[3].replace(docs["d3"], "w5 w6")]  # d3's id again, other text
    corpus_file.write_text("\n".join(twice) + "\n")
    with pytest.raises(DataError, match="duplicate document id 'd3'"):
        pipeline(data, tmp_path, cache)

    lines[5] = lines[5].replace(docs["d5"], "w11 " + docs["d5"])
    corpus_file.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    crlf = pipeline(data, tmp_path, cache)
    assert crlf.corpus_counts["cache/corpus/n_parsed_documents"] == len(docs)
