"""The query-side stages in the pipeline: abbreviations mined after chunking (``CorpusFitted``),
query metadata handed to the stages that read it (``QueryMetadataAware``), the router given the
query texts (``QueryConditioned``), and what keys the cached runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rag_lab.cache import keys
from rag_lab.pipeline import Pipeline
from rag_lab.pipeline.build import build_dataset, build_pipeline
from rag_lab.types import Chunk, Run
from tests.compose import compose_evaluate

# no OCR of the scanned PDF page (not what these tests are about, and the slow part of a load)
SAMPLE = ["embedder=hashing", "tracking=none", "retrievers=[bm25]", "parser.parsers.pdf.ocr=off"]
TABLE = "line3-electrical-spares-zh#1"  # writes only 可编程逻辑控制器输入输出模块
TICKET = "TCK-2024-0306#0"  # writes only "PLC的IO模块"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


def loaded(tmp_path: Path, cache_dir: Path, *overrides: str) -> tuple[Pipeline, Any]:
    cfg = compose_evaluate([*SAMPLE, f"cache.dir={cache_dir}", *overrides], tmp_path)
    data = build_dataset(cfg).load()
    pipe = build_pipeline(cfg)
    pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    return pipe, data


def test_mined_abbreviations_reach_the_full_form_table_and_back(tmp_path, cache_dir):
    pipe, _ = loaded(tmp_path, cache_dir, "query_transforms=[abbreviations]")
    mined = pipe.query_transforms["abbreviations"]
    pairs = {(a, b) for a, b, _ in mined.pairs}  # type: ignore[attr-defined]
    assert {("PLC", "可编程逻辑控制器"), ("I/O", "输入输出"), ("VFD", "变频器")} <= pairs
    plain, _ = loaded(tmp_path, cache_dir)
    q = {"fwd": "PLC-IO 模块故障", "back": "可编程逻辑控制器输入输出模块指示灯全灭"}
    result, before = pipe.run(q, 20), plain.run(q, 20).final
    assert "可编程逻辑控制器" in result.queries["fwd"] and "PLC" in result.queries["back"]
    assert TABLE in list(result.final["fwd"])[:5]
    assert TICKET in list(result.final["back"])[:5]
    # the expansion is what matches them: BM25 scores them higher on the expanded text
    assert result.final["fwd"][TABLE] > before["fwd"][TABLE]
    assert result.final["back"][TICKET] > before["back"][TICKET]
    assert result.stats["abbreviations/n_pairs"] == len(mined.pairs)  # type: ignore[attr-defined]
    assert "abbreviations/ms_per_query" in result.stats


def test_another_mined_dictionary_keys_other_runs(tmp_path, cache_dir):
    q = {"fwd": "PLC-IO 模块故障"}
    first, _ = loaded(tmp_path, cache_dir, "query_transforms=[abbreviations]")
    first.run(q, 10)
    again, _ = loaded(tmp_path, cache_dir, "query_transforms=[abbreviations]")
    assert again.run(q, 10).from_cache["bm25"]
    # a definition must be written twice: nothing is mined, the text stays, so does the key
    strict, _ = loaded(
        tmp_path,
        cache_dir,
        "query_transforms=[abbreviations]",
        "query_transforms.abbreviations.min_count=5",
    )
    assert strict.run(q, 10).queries["fwd"] == "PLC-IO 模块故障"
    texts = {p.run(q, 10).queries["fwd"] for p in (first, strict)}
    chunks_key = first.chunks_key
    run_keys = {keys.run_key(None, None, 10, chunks_key, {"fwd": t}) for t in texts}
    assert len(texts) == len(run_keys) == 2


class Recorder:
    """A post-processor that records the metadata it was given (and changes nothing)."""

    query_metadata_fields = ("as_of",)

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def set_query_metadata(self, metadata: Mapping[str, Mapping[str, Any]]) -> None:
        self.seen.append({q: dict(m) for q, m in metadata.items()})

    def process(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run:
        return run


def test_query_metadata_reaches_the_stages_that_declare_it(tmp_path, cache_dir):
    pipe, data = loaded(tmp_path, cache_dir, "postprocess=[metadata_filter]")
    recorder = Recorder()
    pipe.postprocessors["recorder"] = recorder
    old, new = "q124", "q125"  # the same text asked in 2022 and in 2024
    assert data.queries[old].text == data.queries[new].text
    queries = {q: data.queries[q].text for q in (old, new)}
    meta = {q: data.queries[q].metadata for q in (old, new)}
    result = pipe.run(queries, 20, query_metadata=meta)
    assert recorder.seen == [{old: {"as_of": "2022-05-10"}, new: {"as_of": "2024-05-10"}}]
    docs = {q: [cid.split("#")[0] for cid in result.final[q]] for q in queries}
    assert "hx200-manual-v1" in docs[old] and "hx200-manual-v2" not in docs[old]
    assert "hx200-manual-v2" in docs[new] and "hx200-manual-v1" not in docs[new]
    assert result.stats["metadata_filter/dated_queries"] == 2
    # no metadata: the stages are told so, and the filter keeps both editions
    undated = pipe.run(queries, 20)
    assert recorder.seen[-1] == {}
    assert {"hx200-manual-v1", "hx200-manual-v2"} <= {c.split("#")[0] for c in undated.final[old]}


class DatedRetriever:
    """A retriever that reads ``as_of``: its cached run must be keyed by it."""

    query_metadata_fields = ("as_of",)

    def __init__(self) -> None:
        self.calls = 0

    def set_query_metadata(self, metadata: Mapping[str, Mapping[str, Any]]) -> None:
        self.metadata = dict(metadata)

    def index(self, chunks: Sequence[Chunk]) -> None:
        self.first = chunks[0].chunk_id

    def retrieve(self, queries: Mapping[str, str], k: int) -> Run:
        self.calls += 1
        return {q: {self.first: 1.0} for q in queries}


def test_a_metadata_reading_retriever_is_cached_per_metadata(tmp_path, cache_dir):
    pipe, _ = loaded(tmp_path, cache_dir)
    pipe.retrievers.clear()  # the stages share the pipeline's dict
    pipe.retrievers["dated"] = DatedRetriever()  # type: ignore[assignment]
    q = {"a": "E102"}
    assert not pipe.run(q, 5, query_metadata={"a": {"as_of": "2022-01-01"}}).from_cache["dated"]
    assert pipe.run(q, 5, query_metadata={"a": {"as_of": "2022-01-01"}}).from_cache["dated"]
    assert not pipe.run(q, 5, query_metadata={"a": {"as_of": "2024-01-01"}}).from_cache["dated"]
    # a field it does not declare does not split its cache
    assert pipe.run(
        q, 5, query_metadata={"a": {"as_of": "2024-01-01", "category": "x"}}
    ).from_cache["dated"]


def test_the_router_gets_the_query_texts(tmp_path, cache_dir):
    pipe, _ = loaded(tmp_path, cache_dir, "retrievers=[bm25,dense]", "fusion=routed")
    q = {
        "code": "SV0432 是什么报警",
        "model": "HX-200 换油周期",
        "talk": "油站开不了多久就热得冒烟",
    }
    result = pipe.run(q, 10)
    stats = result.stats
    assert stats["fusion/share/code"] == stats["fusion/share/model"] == pytest.approx(1 / 3)
    assert stats["fusion/share/colloquial"] == pytest.approx(1 / 3)
    assert stats["fusion/ms_per_query"] >= 0
    # the code query is fused with BM25 weighted 0.7 / dense 0.3 (conf/fusion/routed.yaml)
    from rag_lab.fusion import RRFFusion

    alone = {n: {"code": result.runs[n]["code"]} for n in ("bm25", "dense")}
    expected = RRFFusion(60, {"bm25": 0.7, "dense": 0.3}).fuse(alone, 10)["code"]
    assert result.final["code"] == pytest.approx(expected)
