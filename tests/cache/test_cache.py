"""Stage cache: keys, atomic writes, and invalidation of exactly the stages downstream of a
change."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rag_lab import cache as cache_mod
from rag_lab.cache import StageCache, clear, content_key, inventory, stage_key
from rag_lab.evaluate import evaluate
from tests.compose import TOY, compose_evaluate


def test_stage_key_is_deterministic_and_sensitive():
    a = stage_key("chunks", {"size": 512, "unit": "chars"}, "in1")
    assert a == stage_key(
        "chunks", {"unit": "chars", "size": 512}, "in1"
    )  # key order does not matter
    assert a != stage_key("chunks", {"size": 256, "unit": "chars"}, "in1")
    assert a != stage_key("chunks", {"size": 512, "unit": "chars"}, "in2")
    assert a != stage_key("documents", {"size": 512, "unit": "chars"}, "in1")
    assert content_key({"m": 1}, ["ab", "c"]) != content_key(
        {"m": 1}, ["a", "bc"]
    )  # length-prefixed


def test_roundtrip_counters_and_inventory(tmp_path):
    c = StageCache(tmp_path)
    assert c.get_json("runs", "k1") is None
    c.put_json("runs", "k1", {"q": {"d#0": 1.5}})
    assert c.get_json("runs", "k1") == {"q": {"d#0": 1.5}}
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    c.put_array("embeddings", "k2", arr)
    np.testing.assert_array_equal(c.get_array("embeddings", "k2"), arr)
    s = c.stats()
    assert s["cache_hits"] == 2 and s["cache_misses"] == 1 and s["cache_bytes_written"] > 0
    inv = inventory(tmp_path)
    assert inv["runs"]["entries"] == 1 and inv["embeddings"]["entries"] == 1
    assert clear(tmp_path, ["runs"]) > 0 and "runs" not in inventory(tmp_path)


def test_plain_entries_read_back_what_json_reads(tmp_path):
    """A ``plain`` entry (a run) goes through orjson, falling back to ``json.dumps`` where orjson
    would write something else (NaN as null); entries written before (``json.dumps``) read."""
    c = StageCache(tmp_path / "c")
    run = {"run": {"q1": {"d1#0": 12.5, "d2#0": 0.1 + 0.2}}, "latency_ms": [1.25, 3.0]}
    c.put_json("runs", "a" * 32, run, plain=True)
    raw = gzip.decompress(c.path("runs", "a" * 32, "json.gz").read_bytes())
    assert b" " not in raw  # orjson's spelling, not json.dumps'
    assert c.get_json("runs", "a" * 32, plain=True) == run
    odd = {"run": {"q1": {"d1#0": float("inf")}}, "latency_ms": [float("nan")]}
    c.put_json("runs", "b" * 32, odd, plain=True)
    back = c.get_json("runs", "b" * 32, plain=True)
    assert back["run"]["q1"]["d1#0"] == float("inf") and np.isnan(back["latency_ms"][0])
    p = c.path("runs", "c" * 32, "json.gz")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(gzip.compress(json.dumps(odd).encode()))  # an entry of rag_lab <= 0.5
    assert np.isnan(c.get_json("runs", "c" * 32, plain=True)["latency_ms"][0])


def test_failed_write_leaves_no_entry_and_corrupt_entry_is_a_miss(tmp_path):
    c = StageCache(tmp_path)

    def explode(fh):
        fh.write(b"partial")
        raise KeyboardInterrupt  # a killed job

    with pytest.raises(KeyboardInterrupt):
        c._write(c.path("runs", "k", "json.gz"), explode)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))
    p = c.path("runs", "k", "json.gz")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(gzip.compress(b'{"trunc')[:-4])
    assert c.get_json("runs", "k") is None


@pytest.fixture
def toy_copy(tmp_path):
    dst = tmp_path / "toy"
    shutil.copytree(TOY, dst)
    return dst


def run(tmp_path: Path, data: Path, *extra: str) -> dict:
    cfg = compose_evaluate(
        [
            "dataset=beir",
            f"dataset.path={data}",
            "tokenizer=jieba",
            "embedder=hashing",
            "retrievers=[dense,bm25]",
            "tracking=none",
            f"cache.dir={tmp_path / 'cache'}",
            *extra,
        ],
        tmp_path,
    )
    return evaluate(cfg)


def counts(m: dict) -> dict[str, tuple[int, int]]:
    """(hits, misses) per namespace; embeddings count one per chunk text (a row each)."""
    return {
        ns: (int(m[f"cache/{ns}/hits"]), int(m[f"cache/{ns}/misses"]))
        for ns in ("documents", "chunks", "embeddings", "runs")
    }


def test_invalidation_recomputes_exactly_the_downstream_stages(tmp_path, toy_copy):
    cold = run(tmp_path, toy_copy)
    n = int(cold["n_chunks"])  # the toy's chunk texts are all different
    assert counts(cold) == {
        "documents": (0, 1),
        "chunks": (0, 1),
        "embeddings": (0, n),
        "runs": (0, 2),
    }
    warm = run(
        tmp_path, toy_copy
    )  # nothing changed: chunks and both runs read back, nothing embedded
    assert counts(warm) == {
        "documents": (0, 0),
        "chunks": (1, 0),
        "embeddings": (0, 0),
        "runs": (2, 0),
    }
    assert warm["dense/run_from_cache"] == warm["bm25/run_from_cache"] == 1.0
    for key in (
        "ndcg_at_10",
        "hit_rate_at_5",
        "noise_ratio_at_5",
        "map_at_100",
        "evidence_hit_rate_at_5",
    ):
        assert warm[key] == cold[key]
    # fusion replays the cached per-retriever runs
    fused = run(tmp_path, toy_copy, "fusion=weighted")
    assert counts(fused)["runs"] == (2, 0) and counts(fused)["embeddings"] == (0, 0)
    # a chunker parameter: documents hit; chunks, embeddings and both runs recompute
    rechunk = run(tmp_path, toy_copy, "chunker=fixed_size", "chunker.size=60", "chunker.overlap=10")
    c = counts(rechunk)
    assert (c["documents"], c["chunks"], c["runs"]) == ((1, 0), (0, 1), (0, 2))
    # every new chunk text is looked up once; texts the old chunking also had are not re-embedded
    assert sum(c["embeddings"]) == rechunk["n_chunks"] and c["embeddings"][1] > 0
    # the model: chunks and the BM25 run hit; embeddings and the dense run recompute
    remodel = run(tmp_path, toy_copy, "embedder.dimension=512")
    assert counts(remodel) == {
        "documents": (0, 0),
        "chunks": (1, 0),
        "embeddings": (0, n),
        "runs": (1, 1),
    }
    assert remodel["bm25/run_from_cache"] == 1.0 and remodel["dense/run_from_cache"] == 0.0
    # labels only: the corpus fingerprint is unchanged, so everything hits
    with open(toy_copy / "qrels" / "test.tsv", "a") as fh:
        fh.write("q9\td8\t1\n")
    relabel = run(tmp_path, toy_copy)
    # a new query joined the split, so the runs (keyed by the query set) miss; both indexes are
    # restored from the cache: nothing is re-encoded or re-tokenised
    assert counts(relabel) == {
        "documents": (0, 0),
        "chunks": (1, 0),
        "embeddings": (0, 0),
        "runs": (0, 2),
    }
    assert (relabel["cache/indexes/hits"], relabel["cache/indexes/misses"]) == (2, 0)
    # one edited document: documents, chunks, indexes and runs recompute, but only that
    # document's chunk is embedded again; the indexes are updated in place from the earlier
    # ones (read back), so the other chunks' vectors are not even read from the embedding table
    lines = (toy_copy / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[6])
    rec["text"] += " Check the drain valve weekly."
    lines[6] = json.dumps(rec, ensure_ascii=False)
    (toy_copy / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    edited = run(tmp_path, toy_copy)
    assert counts(edited) == {
        "documents": (0, 1),
        "chunks": (0, 1),
        "embeddings": (0, 1),
        "runs": (0, 2),
    }
    assert edited["dense/embedded_chunks"] == 1.0
    assert edited["bm25/updated_chunks"] == edited["dense/updated_chunks"] == 1.0
    assert (edited["cache/indexes/hits"], edited["cache/indexes/misses"]) == (2, 2)


def test_killed_run_resumes_with_identical_metrics(tmp_path, toy_copy, monkeypatch):
    uncached = run(tmp_path, toy_copy, "cache.dir=null")
    real_put = cache_mod.StageCache.put_json

    def dying_put(self, namespace, key, value, **kw):
        if namespace == "runs":
            raise KeyboardInterrupt("killed while writing a run")
        return real_put(self, namespace, key, value, **kw)

    monkeypatch.setattr(cache_mod.StageCache, "put_json", dying_put)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, toy_copy)
    monkeypatch.setattr(cache_mod.StageCache, "put_json", real_put)
    resumed = run(tmp_path, toy_copy)
    # everything written before the kill is reused: chunks, the dense index and the dense run's
    # per-query rows (stored before the job died writing the whole run), so nothing is embedded
    # or searched for dense; BM25 was never reached
    assert counts(resumed)["chunks"] == (1, 0) and counts(resumed)["embeddings"] == (0, 0)
    assert (resumed["cache/indexes/hits"], resumed["cache/indexes/misses"]) == (0, 1)
    n_queries = int(resumed["n_queries"])
    assert resumed["cache/query_runs/hits"] == resumed["cache/query_runs/misses"] == n_queries
    again = run(tmp_path, toy_copy)
    assert counts(again)["runs"] == (2, 0)
    for key in ("ndcg_at_10", "recall_at_100", "noise_ratio_at_5", "mrr_at_10"):
        assert resumed[key] == uncached[key] == again[key]


def test_indexes_are_restored_when_runs_miss(tmp_path, toy_copy):
    cold = run(tmp_path, toy_copy)
    assert (cold["cache/indexes/hits"], cold["cache/indexes/misses"]) == (0, 2)
    assert inventory(tmp_path / "cache")["indexes"]["entries"] > 0
    clear(tmp_path / "cache", ["runs", "query_runs"])
    warm = run(tmp_path, toy_copy)
    assert (warm["cache/indexes/hits"], warm["cache/indexes/misses"]) == (2, 0)
    assert counts(warm)["embeddings"] == (0, 0) and counts(warm)["runs"] == (0, 2)
    assert warm["dense/index_loaded"] == warm["bm25/index_loaded"] == 1.0
    for key in ("ndcg_at_10", "recall_at_100", "noise_ratio_at_5", "mrr_at_10", "map_at_100"):
        assert warm[key] == cold[key]


def test_rank_bm25_backend_is_rebuilt_not_persisted(tmp_path, toy_copy):
    first = run(tmp_path, toy_copy, "retrievers=[bm25]", "retrievers.bm25.backend=rank_bm25")
    clear(tmp_path / "cache", ["runs", "query_runs"])
    second = run(tmp_path, toy_copy, "retrievers=[bm25]", "retrievers.bm25.backend=rank_bm25")
    assert second["cache/indexes/hits"] == 0 and second["ndcg_at_10"] == first["ndcg_at_10"]


def test_tables_views_and_every_namespace_is_managed(tmp_path):
    from rag_lab.cache import NAMESPACES
    from rag_lab.cache.keys import model_table, pair_key, text_key

    c = StageCache(tmp_path)
    scores, vectors = c.view("rerank_scores"), c.view("embeddings")
    table = model_table({"kind": "cross_encoder", "model": "m"})
    keys = [pair_key("q", "a"), pair_key("q", "b")]
    assert scores.get_floats(table, keys) == {}
    scores.put_floats(table, {keys[0]: -1.25})
    assert scores.get_floats(table, keys) == {keys[0]: -1.25}
    vec = np.arange(4, dtype=np.float32)
    vectors.put_vectors(model_table({"m": 1}), {text_key("t"): vec})
    np.testing.assert_array_equal(
        vectors.get_vectors(model_table({"m": 1}), [text_key("t")])[text_key("t")], vec
    )
    s = c.stats()
    # rows count one each: 2 misses then 1 hit + 1 miss for scores, 1 hit for vectors
    assert (s["cache/rerank_scores/hits"], s["cache/rerank_scores/misses"]) == (1, 3)
    assert (s["cache/embeddings/hits"], s["cache/embeddings/misses"]) == (1, 0)
    assert pair_key("q", "ab") != pair_key("qa", "b")  # the pair's parts are length-prefixed
    with pytest.raises(ValueError, match="unknown cache namespace"):
        c.view("nope")
    inv = inventory(tmp_path)
    assert set(inv) == {"rerank_scores", "embeddings"} <= set(NAMESPACES)
    assert clear(tmp_path, ["rerank_scores"]) > 0 and set(inventory(tmp_path)) == {"embeddings"}


SCIFACT = (
    Path(
        __import__("os").environ.get(
            "RAG_LAB_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"
        )
    )
    / "scifact"
)


@pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").is_file(), reason="SciFact not on this machine")
def test_editing_one_scifact_document_reembeds_only_its_chunks(tmp_path):
    """Per-chunk-text embedding cache on a real corpus: 5,183 abstracts, recursive chunks."""
    from rag_lab.pipeline.build import build_dataset, build_pipeline

    data_dir = tmp_path / "scifact"
    shutil.copytree(SCIFACT, data_dir)
    overrides = [
        "dataset=beir",
        f"dataset.path={data_dir}",
        "chunker=recursive",
        "embedder=hashing",
        "retrievers=[dense]",
        "tracking=none",
        f"cache.dir={tmp_path / 'cache'}",
    ]

    def index() -> tuple[dict, dict]:
        cfg = compose_evaluate(overrides, tmp_path)
        data = build_dataset(cfg).load()
        pipe = build_pipeline(cfg)
        before = pipe.cache.stats()
        pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
        pipe.index_all()
        after = pipe.cache.stats()
        return pipe.chunks, {k: after[k] - before.get(k, 0) for k in after}

    cold_chunks, cold = index()
    texts = {c.index_text for c in cold_chunks.values()}
    assert cold["cache/embeddings/misses"] == len(texts) > 5183
    lines = (data_dir / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[100])
    rec["text"] = "Editorial note: this abstract was revised. " + rec["text"]
    lines[100] = json.dumps(rec, ensure_ascii=False)
    (data_dir / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    chunks, edited = index()
    doc_chunks = [c for c in chunks.values() if c.doc_id == str(rec["_id"])]
    new_texts = {c.index_text for c in chunks.values()} - texts
    assert 0 < len(new_texts) <= len(doc_chunks)
    assert all(c.index_text in texts for c in chunks.values() if c.doc_id != str(rec["_id"]))
    assert edited["cache/embeddings/misses"] == len(new_texts)
    # the faiss index is updated in place: only the chunks the edit changed are looked up
    changed = [
        c for c in chunks.values() if c.chunk_id not in cold_chunks or c != cold_chunks[c.chunk_id]
    ]
    assert edited["cache/embeddings/hits"] == len({c.index_text for c in changed}) - len(new_texts)
    assert edited["cache/indexes/misses"] == 1 and edited["cache/indexes/hits"] == 1
