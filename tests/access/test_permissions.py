"""Permissions (issue 35, item 2): a document's ``readers`` against a query's ``principal``,
enforced inside retrieval so that no path — BM25, dense, fusion, post-processors, a cached run,
a fallback corpus, an export, the server — returns a chunk the principal cannot read; fail-closed.

The fixture (``tests/data/acl``) is adversarial: a document without the field, one with an empty
list, one with a malformed value, groups written in full width and mixed case, a principal whose
groups only resemble an allowed one, and an anonymous query."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from rag_lab.access import ReadersPolicy, normalise_name, principal_of, readers_of
from rag_lab.errors import DataError
from rag_lab.evaluate import evaluate
from rag_lab.pipeline.build import build_dataset, build_pipeline
from rag_lab.retrievers import BM25Retriever, DenseRetriever, FilteredRetriever
from rag_lab.types import Chunk, Run
from tests.compose import compose_evaluate

ACL = Path(__file__).resolve().parents[1] / "data" / "acl"
FALLBACK = ACL.parent / "acl_fallback"
BASE = [
    "dataset=beir",
    f"dataset.path={ACL}",
    "embedder=hashing",
    "tracking=none",
    "retrievers=[bm25,dense]",
    "fusion=rrf",
]
# who may read which document of the fixture (unlabelled and malformed: nobody, fail-closed)
READS = {
    "q1": {"pub", "maint", "wide", "case"},  # bob, group maintenance
    "q2": {"pub", "alice"},  # alice, no groups
    "q3": {"pub"},  # anonymous
    "q4": {"pub", "maint", "wide", "case"},  # ｂｏｂ / ＭａｉｎｔｅｎａｎｃＥ: the same names
    "q5": {"pub"},  # carol, empty groups
    "q6": {"pub"},  # dave: maintenance-team and maintenance:x are other groups
}


def chunk(doc: str, readers: Any = None, missing: bool = False) -> Chunk:
    meta = {} if missing else {"readers": readers}
    return Chunk(f"{doc}#0", doc, doc, 0, len(doc), "", "", meta)


# -- the normal forms -----------------------------------------------------------------------------
def test_names_compare_after_nfkc_and_case_folding():
    assert (
        normalise_name("ＭＡＩＮＴＥＮＡＮＣＥ ") == normalise_name("maintenance") == "maintenance"
    )
    assert normalise_name("Straße") == normalise_name("STRASSE")
    assert readers_of({"readers": ["Group:Ops", "ALICE", "*", " "]}) == {
        "group:ops",
        "user:alice",
        "*",
    }
    assert readers_of({}) is None and readers_of({"readers": None}) is None
    assert readers_of({"readers": []}) == frozenset()  # nobody, not unknown
    assert readers_of({"readers": {"group": "ops"}}) is None  # malformed: unknown, never a grant
    assert readers_of({"readers": ["ops", {"x": 1}]}) is None
    p = principal_of({"user": "Ｂｏｂ", "groups": ["OPS", "ops"]})
    assert p.tokens == {"*", "user:bob", "group:ops"}
    with pytest.raises(ValueError, match="unknown key"):
        principal_of({"user": "bob", "role": "admin"})


def test_the_policy_is_fail_closed():
    deny = ReadersPolicy()
    bob = {"user": "bob", "groups": ["ops"]}
    assert deny.readable(chunk("a", ["group:ops"]), bob)
    assert deny.readable(chunk("a", ["GROUP:ＯＰＳ"]), bob)
    assert not deny.readable(chunk("a", ["group:ops-team"]), bob)
    assert not deny.readable(chunk("a", ["user:ops"]), bob)  # a user named like the group
    assert not deny.readable(chunk("a", missing=True), bob)
    assert not deny.readable(chunk("a", []), bob)
    assert not deny.readable(chunk("a", ["group:ops"]), {"user": "bob", "groups": []})
    assert not deny.readable(chunk("a", ["group:ops"]), None)
    assert deny.readable(chunk("a", ["*"]), None)
    allow = ReadersPolicy(unlabelled="allow")
    assert allow.readable(chunk("a", missing=True), None)
    assert not allow.readable(chunk("a", []), bob)  # an empty list still means nobody
    with pytest.raises(DataError, match="principal"):
        deny.readable(chunk("a", ["*"]), 42)


# -- inside the retrievers ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def acl_chunks(tmp_path_factory: pytest.TempPathFactory) -> list[Chunk]:
    cfg = compose_evaluate(BASE, tmp_path_factory.mktemp("acl"))
    data = build_dataset(cfg).load()
    pipe = build_pipeline(cfg)
    return pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)


def _retrievers() -> list[Any]:
    from rag_lab.embedder import HashingEmbedder
    from rag_lab.tokenizer import EnglishTokenizer

    return [
        BM25Retriever(EnglishTokenizer()),
        BM25Retriever(EnglishTokenizer(), backend="rank_bm25"),
        DenseRetriever(HashingEmbedder(EnglishTokenizer())),
        DenseRetriever(HashingEmbedder(EnglishTokenizer()), index_type="hnsw", hnsw_segment_rows=4),
    ]


@pytest.mark.parametrize("which", range(4))
def test_retrieve_within_is_the_filtered_ranking(acl_chunks, which):
    """The pre-filter gives the k best of the allowed chunks: the full ranking filtered, cut."""
    retriever = _retrievers()[which]
    assert isinstance(retriever, FilteredRetriever)
    retriever.index(acl_chunks)
    q = {"q": "HX-200 E102 oil temperature cooling fan"}
    allowed = {"pub#0", "alice#0", "hr#0"}
    full = retriever.retrieve(q, len(acl_chunks))["q"]
    want = [c for c in sorted(full, key=lambda c: -full[c]) if c in allowed][:2]
    got = retriever.retrieve_within(q, 2, allowed)["q"]
    assert set(got) <= allowed
    assert sorted(got) == sorted(want)
    assert all(got[c] == pytest.approx(full[c], abs=1e-5) for c in got)
    assert retriever.retrieve_within(q, 5, set())["q"] == {}


# -- the pipeline ---------------------------------------------------------------------------------
def _loaded(tmp_path: Path, *extra: str) -> tuple[Any, Any]:
    cfg = compose_evaluate([*BASE, f"cache.dir={tmp_path / 'cache'}", *extra], tmp_path)
    data = build_dataset(cfg).load()
    pipe = build_pipeline(cfg)
    pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    return pipe, data


def _docs(run: Run) -> dict[str, set[str]]:
    return {q: {c.split("#")[0] for c in scores} for q, scores in run.items()}


def _meta(data: Any) -> dict[str, Mapping[str, Any]]:
    return {q: x.metadata for q, x in data.queries.items()}


def test_no_stage_returns_what_the_principal_cannot_read(tmp_path):
    pipe, data = _loaded(tmp_path, "permissions=readers", "postprocess=[metadata_filter]")
    queries = {q: x.text for q, x in data.queries.items()}
    result = pipe.run(queries, 10, query_metadata=_meta(data))
    for name, run in {**result.runs, "final": result.final}.items():
        for qid, docs in _docs(run).items():
            assert docs <= READS[qid], (name, qid, docs - READS[qid])
    # the pre-filter keeps recall: the readable documents that match are found
    assert {"maint", "pub"} <= _docs(result.final)["q1"]
    assert _docs(result.final)["q4"] >= {"wide", "case"}  # full width and case: one group
    assert _docs(result.final)["q2"] == {"pub", "alice"}
    assert all(v == 0 for k, v in result.stats.items() if k.startswith("access/"))
    # the contract stored the readers in canonical form
    assert pipe.chunks["wide#0"].metadata["readers"] == ["group:maintenance"]


class Leaky:
    """A post-processor that puts a forbidden chunk at the top of every query."""

    def process(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run:
        return {q: {"hr#0": 99.0, **scores} for q, scores in run.items()}


def test_a_stage_cannot_be_ordered_around_the_check(tmp_path):
    pipe, data = _loaded(tmp_path, "permissions=readers")
    pipe.postprocessors["leaky"] = pipe.query_side.postprocessors["leaky"] = Leaky()  # type: ignore[assignment]
    queries = {q: x.text for q, x in data.queries.items()}
    result = pipe.run(queries, 10, query_metadata=_meta(data))
    assert all("hr#0" not in scores for scores in result.final.values())
    assert result.stats["access/leaky/caught"] == len(queries)


def test_a_cached_run_is_keyed_by_the_principal(tmp_path):
    pipe, _ = _loaded(tmp_path, "permissions=readers")
    q = {"a": "HX-200 E102 oil temperature"}
    alice = pipe.run(q, 10, query_metadata={"a": {"principal": "alice"}})
    assert "alice" in _docs(alice.final)["a"]
    again, _ = _loaded(tmp_path, "permissions=readers")  # same cache
    carol = again.run(q, 10, query_metadata={"a": {"principal": "carol"}})
    assert not any(carol.from_cache.values())
    assert _docs(carol.final)["a"] == {"pub"}
    assert again.run(q, 10, query_metadata={"a": {"principal": "ALICE"}}).from_cache["bm25"]


def test_unlabelled_documents_only_when_the_config_says_so(tmp_path):
    pipe, _ = _loaded(tmp_path, "permissions=readers", "permissions.unlabelled=allow")
    q = {"a": "E102 draft notes cooling fan"}
    docs = _docs(pipe.run(q, 10).final)["a"]
    assert "unlabelled" in docs and "malformed" in docs
    assert not docs & {"nobody", "maint", "alice", "hr"}


def test_a_fallback_corpus_without_the_field_returns_nothing(tmp_path):
    fallback = [
        "fallback=chain",
        "fallback.accept.threshold=1000",  # the main corpus never satisfies: the level answers
        f"fallback.levels.standards.corpus={FALLBACK}",
        "~fallback.levels.bm25_unfiltered",
        "fallback.levels.standards.accept.threshold=null",
    ]
    q = {"a": "E102 oil temperature standard limit"}
    pipe, _ = _loaded(tmp_path, "permissions=readers", *fallback)
    result = pipe.run(q, 10, query_metadata={"a": {"principal": "bob"}})
    assert result.final["a"] == {}  # refused: the standard has no readers, nobody may read it
    opened, _ = _loaded(tmp_path, "permissions=readers", "permissions.unlabelled=allow", *fallback)
    assert "std-e102" in _docs(opened.run(q, 10).final)["a"]


def test_permission_leaks_metric(tmp_path):
    def run(*extra: str) -> tuple[dict[str, float], Any]:
        cfg = compose_evaluate(BASE + list(extra), tmp_path / "-".join(extra or ("none",)))
        metrics = evaluate(cfg)
        import pandas as pd

        return metrics, pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet")

    open_metrics, open_table = run()  # no policy: what leaks, measured against the default one
    assert open_metrics["permission_leaks"] > 0
    assert set(open_table.loc[open_table["permission_leaks"] > 0, "query_id"]) >= {"q3", "q5"}
    closed, table = run("permissions=readers")
    assert closed["permission_leaks"] == 0
    assert (table["permission_leaks"] == 0).all()
    on_disk = json.loads((tmp_path / "permissions=readers" / "run" / "metrics.json").read_text())
    assert on_disk["permission_leaks"] == 0


# -- export and serve -----------------------------------------------------------------------------
def test_an_export_and_its_server_answer_only_what_the_principal_may_read(tmp_path):
    from starlette.testclient import TestClient

    from rag_lab.export import export_pipeline, load_pipeline
    from rag_lab.server.http import create_app
    from rag_lab.server.service import KnowledgeService, ServeSettings

    cfg = compose_evaluate([*BASE, "permissions=readers"], tmp_path)
    evaluate(cfg)
    export = export_pipeline(Path(cfg.paths.output_dir), tmp_path / "export")
    loaded = load_pipeline(export)
    text = "HX-200 E102 oil temperature"
    assert {h["doc_id"] for h in loaded.retrieve(text, 10)} == {"pub"}  # anonymous
    assert {h["doc_id"] for h in loaded.retrieve(text, 10, principal="alice")} == {"pub", "alice"}
    assert loaded.get_chunk("hr#0") is None  # exists, but not for an anonymous caller
    assert loaded.get_chunk("hr#0", {"user": "x", "groups": ["ＨＲ"]})["doc_id"] == "hr"
    with TestClient(create_app(KnowledgeService(ServeSettings(export=str(export))))) as client:

        def served(**body: Any) -> set[str]:
            reply = client.post("/v1/retrieve", json={"query": text, "k": 10, **body})
            assert reply.status_code == 200, reply.text
            return {h["doc_id"] for h in reply.json()["hits"]}

        assert served() == {"pub"}
        bob = served(principal={"user": "bob", "groups": ["Maintenance"]})
        assert {"pub", "maint"} <= bob <= READS["q1"]
        assert served(principal="alice") == {"pub", "alice"}
        # a principal smuggled in as query metadata is the same principal, no more
        assert served(metadata={"principal": {"groups": ["hr"]}}) == {"pub", "hr"}
        assert client.get("/v1/chunks/hr%230").status_code == 404
        assert client.get("/v1/chunks/hr%230?user=x&group=hr").status_code == 200
        bad = client.post("/v1/retrieve", json={"query": text, "principal": {"role": "admin"}})
        assert bad.status_code == 400 and "principal" in bad.text


class Everything:
    """A retriever with no filter of its own (as a LangChain component): every chunk, always."""

    def index(self, chunks: Any) -> None:
        self.ids = [c.chunk_id for c in chunks]

    def retrieve(self, queries: Mapping[str, str], k: int) -> Run:
        self.depths = getattr(self, "depths", []) + [k]
        return {q: {c: 1.0 / (i + 1) for i, c in enumerate(self.ids[:k])} for q in queries}


def test_a_retriever_without_a_filter_is_filtered_over_its_whole_ranking(tmp_path):
    pipe, data = _loaded(tmp_path, "permissions=readers", "retrievers=[bm25]", "cache.dir=null")
    everything = Everything()
    pipe.retrievers.clear()
    pipe.retrievers["everything"] = everything  # type: ignore[assignment]
    queries = {q: x.text for q, x in data.queries.items()}
    result = pipe.run(queries, 2, query_metadata=_meta(data))
    assert set(everything.depths) == {len(pipe.chunks)}  # asked for its whole ranking
    for qid, docs in _docs(result.final).items():
        assert docs <= READS[qid] and len(docs) == min(2, len(READS[qid])), qid
