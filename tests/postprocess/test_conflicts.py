"""Conflict detection on the sample's HX-200 manuals (v1 and v2 disagree on intervals and the E102
trip temperature) and the CH-30 chiller manual (another E102)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rag_lab.chunker import RecursiveChunker
from rag_lab.metrics.score import annotation_metrics, with_annotations
from rag_lab.parser.base import parse_file
from rag_lab.parser.markdown import MarkdownParser
from rag_lab.parser.pdf import PdfParser
from rag_lab.paths import CONFIG_DIR
from rag_lab.pipeline import Pipeline, build
from rag_lab.postprocess import ConflictDetector, PostProcessor
from rag_lab.postprocess.conflicts import conflict_notes, notes_by_query, statements
from rag_lab.protocols import Annotating, Measured
from rag_lab.retrievers.bm25 import BM25Retriever
from rag_lab.tokenizer import JiebaTokenizer
from rag_lab.types import Chunk, Query

DOCS = Path(__file__).resolve().parents[2] / "rag_lab/sample/maintenance_kb/docs"


@pytest.fixture(scope="module")
def chunks() -> dict[str, Chunk]:
    """The sample's HX-200 manuals (PDF, text layer) and CH-30 manual, through the metadata
    contract (entity_tags) and the default recursive chunker: the chunk ids the sample runs use."""
    files = [
        (PdfParser(ocr="off"), "manuals/hx200-manual-v1.pdf"),
        (PdfParser(ocr="off"), "manuals/hx200-manual-v2.pdf"),
        (MarkdownParser(), "manuals/ch30-chiller-manual.md"),
    ]
    docs = [d for p, f in files for _, d in parse_file(p, DOCS / f, DOCS).documents]
    contract = build.instantiate(
        OmegaConf.load(Path(CONFIG_DIR) / "contract/schema.yaml"), "contract"
    )
    docs = list(contract.check(docs, {}).documents)
    return {c.chunk_id: c for c in RecursiveChunker().chunk(docs)}


def test_a_true_conflict_between_versions(chunks):
    pairs = ConflictDetector().pairs([chunks["hx200-manual-v1#10"], chunks["hx200-manual-v2#10"]])
    found = {p["entity"]: p["values"] for p in pairs}
    # the maintenance plan table: return filter 500 h -> 750 h, oil change 2000 h -> 3000 h; the
    # rows that agree (accumulator check at 1000 h, 9 MPa) are no conflict
    assert found == {
        "更换回油滤芯": ["500 h", "750 h"],
        # v2 adds a remark to the row: its leading clause names the same entity
        "更换液压油,同时清洗油箱和吸油滤网": ["2000 h", "3000 h"],
    }
    assert pairs[0]["chunks"] == ["hx200-manual-v1#10", "hx200-manual-v2#10"]
    assert pairs[0]["versions"] == ["1.0", "2.0"]


def test_the_e102_trip_temperature(chunks):
    (pair,) = ConflictDetector().pairs([chunks["hx200-manual-v2#6"], chunks["hx200-manual-v1#6"]])
    assert pair["values"] == ["70 °c", "65 °c"]  # the 10 s delay both state is no conflict
    assert "65 °C" in pair["statements"][1]


def test_the_same_value_written_differently_is_no_conflict(chunks):
    v2 = chunks["hx200-manual-v2#10"]
    # another document stating the plan in other spellings: 3000小时 / 3,000 hours, 750小时
    copy = dataclasses.replace(
        v2,
        chunk_id="hx200-wiki#0",
        doc_id="hx200-wiki",
        text=v2.text.replace("| 3000 h |", "| 3000小时 |").replace("| 750 h |", "| 750 小时 |"),
    )
    assert "3000小时" in copy.text
    assert ConflictDetector().pairs([v2, copy]) == []
    english = dataclasses.replace(copy, text="| 3,000 hours | 更换液压油 |")
    assert ConflictDetector().pairs([v2, english]) == []
    # and the same rewrite of the older value is one
    old = dataclasses.replace(copy, text="| 2000小时 | 更换液压油 |")
    assert [p["values"] for p in ConflictDetector().pairs([v2, old])] == [["3000 h", "2000小时"]]


def test_identical_specifications_across_versions_agree(chunks):
    assert (
        ConflictDetector().pairs([chunks["hx200-manual-v1#3"], chunks["hx200-manual-v2#3"]]) == []
    )


def test_different_entities_with_different_values_are_no_conflict(chunks):
    detector = ConflictDetector()
    # E101 (v1) and E102 (v2) sections: different fault codes, never compared
    assert detector.pairs([chunks["hx200-manual-v1#5"], chunks["hx200-manual-v2#6"]]) == []
    # E102 on the HX-200 and E102 on the CH-30: no shared model tag
    ch30 = [c for c in chunks.values() if c.doc_id == "ch30-chiller-manual"]
    e102 = [c for c in ch30 if "E102" in c.text]
    assert e102
    assert detector.pairs([chunks["hx200-manual-v2#6"], *e102]) == []
    # same equipment, same table, different rows: 750 h for the hoses is not the filter's 500 h
    v1 = chunks["hx200-manual-v1#10"]
    other = dataclasses.replace(
        v1, chunk_id="hx200-wiki#0", doc_id="hx200-wiki", text="| 750 h | 检查软管老化情况 |"
    )
    assert detector.pairs([v1, other]) == []


def test_one_document_is_not_two_sources(chunks):
    v1 = chunks["hx200-manual-v1#10"]
    edited = dataclasses.replace(
        v1, chunk_id="hx200-manual-v1#99", text=v1.text.replace("500", "600")
    )
    assert ConflictDetector().pairs([v1, edited]) == []


def test_short_labels_name_nothing():
    assert statements("出厂值 70 °C") == ()
    assert [s.label for s in statements("出厂值 70 °C", min_label_tokens=2)] == ["出厂值"]


def test_process_flags_without_changing_the_ranking(chunks):
    detector = ConflictDetector(top_n=2, query_overlap=False)
    assert isinstance(detector, PostProcessor)
    assert isinstance(detector, Annotating) and isinstance(detector, Measured)
    run = {
        "a": {"hx200-manual-v1#10": 3.0, "hx200-manual-v2#10": 2.0, "hx200-manual-v1#3": 1.0},
        # the v2 plan is third: outside top_n=2, not compared
        "b": {"hx200-manual-v1#10": 3.0, "hx200-manual-v1#3": 2.0, "hx200-manual-v2#10": 1.0},
    }
    out = detector.process({"a": "", "b": ""}, run, chunks)
    assert out == run and out is not run
    assert set(detector.annotations) == {"a"}
    assert len(detector.annotations["a"]["conflict"]) == 2
    assert detector.stats["flagged_share"] == 0.5
    assert detector.stats["pairs_per_query"] == 1.0


def test_the_pipeline_collects_annotations_and_evaluate_counts_them(chunks):
    pipe = Pipeline(
        parser=PdfParser(ocr="off"),
        chunker=RecursiveChunker(),
        retrievers={"bm25": BM25Retriever(JiebaTokenizer())},
        postprocessors={"conflicts": ConflictDetector(top_n=5)},
    )
    pipe.set_chunks(list(chunks.values()))
    queries = {"oil": "HX-200 换油周期 更换液压油", "ch30": "CH-30 冷水机 E102 相序"}
    result = pipe.run(queries, k=10)
    assert "oil" in result.annotations and "ch30" not in result.annotations
    assert result.final == result.runs["conflicts"]
    labelled = {
        "oil": Query("oil", queries["oil"], {"category": "conflict", "expect_conflict": True}),
        "ch30": Query("ch30", queries["ch30"], {"category": "code", "expect_conflict": True}),
    }
    m = annotation_metrics(result.annotations, labelled, ["conflict"])
    assert m["conflict/n_flagged"] == 1
    assert m["by_category/conflict/conflict/n_flagged"] == 1
    assert m["by_category/code/conflict/n_flagged"] == 0
    assert (m["conflict/precision"], m["conflict/recall"]) == (1.0, 0.5)
    import pandas as pd

    table = with_annotations(pd.DataFrame({"query_id": ["oil", "ch30"]}), result.annotations)
    assert table["conflict"][1] == ""
    assert json.loads(table["conflict"][0]) == result.annotations["oil"]["conflict"]
    # a configured stage that flagged nothing still has its column
    empty = with_annotations(pd.DataFrame({"query_id": ["x"]}), {}, ["conflict"])
    assert list(empty["conflict"]) == [""]


def test_precision_is_undefined_when_nothing_labelled_is_flagged():
    q = {"x": Query("x", "", {"expect_conflict": False})}
    m = annotation_metrics({}, q, ["conflict"])
    assert m["conflict/n_flagged"] == 0 and math.isnan(m["conflict/precision"])
    assert math.isnan(m["conflict/recall"])


def test_notes_for_the_context(chunks):
    detector = ConflictDetector(query_overlap=False)
    detector.process({"q": ""}, {"q": {"hx200-manual-v1#6": 2.0, "hx200-manual-v2#6": 1.0}}, chunks)
    (en,) = conflict_notes(detector.annotations["q"], "en")
    assert "65 °c" in en and "70 °c" in en and "hx200-manual-v1 v1.0" in en
    (zh,) = conflict_notes(detector.annotations["q"], "zh")
    assert zh.startswith("来源不一致") and "hx200-manual-v2 v2.0 为 70 °c" in zh
    assert conflict_notes(None, "en") == [] and conflict_notes({}, "zh") == []
    with pytest.raises(ValueError):
        conflict_notes({}, "fr")


def test_the_sample_s_conflict_queries_are_labelled():
    """The ``conflict`` category (tests/sample counts the others): each query says whether its
    sources disagree (``expect_conflict``) and is judged on the test split; the expected ones
    judge two documents (the disagreeing editions or sources)."""
    kb = DOCS.parent
    qs = [json.loads(line) for line in (kb / "queries.jsonl").read_text("utf-8").splitlines()]
    ours = {q["_id"]: q["metadata"] for q in qs if q["metadata"]["category"] == "conflict"}
    test = [line.split("\t") for line in (kb / "qrels/test.tsv").read_text().splitlines()[1:]]
    judged: dict[str, set[str]] = {}
    for q, d, _ in test:
        judged.setdefault(q, set()).add(d)
    assert len(ours) == 11 and set(ours) <= set(judged)
    assert {type(m["expect_conflict"]) for m in ours.values()} == {bool}
    assert sum(m["expect_conflict"] for m in ours.values()) == 6
    assert all(len(judged[q]) >= 2 for q, m in ours.items() if m["expect_conflict"])


def test_notes_per_query_follow_the_query_language(chunks):
    detector = ConflictDetector(query_overlap=False)
    run = {c: {"hx200-manual-v1#10": 2.0, "hx200-manual-v2#10": 1.0} for c in ("zh", "en", "no")}
    run["no"] = {"hx200-manual-v1#3": 2.0, "hx200-manual-v2#3": 1.0}  # agreeing tables
    detector.process({}, run, chunks)
    notes = notes_by_query(
        detector.annotations, {"zh": "HX-200 换油周期", "en": "HX-200 oil change", "no": "x"}
    )
    assert set(notes) == {"zh", "en"} and len(notes["zh"]) == 2
    assert notes["zh"][0].startswith("来源不一致") and notes["en"][0].startswith("Sources disagree")


def test_only_conflicts_the_query_asks_about(chunks):
    """The spare-parts tables disagree on the service kits (HX-KIT-2000 vs HX-KIT-3000); a
    question about the pump flange bolts in them is not told so, one about the kits is."""
    run = {q: {"hx200-manual-v1#13": 2.0, "hx200-manual-v2#13": 1.0} for q in ("bolt", "kit")}
    queries = {"bolt": "HX-200 泵出口法兰螺栓拧紧力矩", "kit": "HX-200 保养包型号"}
    on, off = ConflictDetector(), ConflictDetector(query_overlap=False)
    on.process(queries, run, chunks)
    off.process(queries, run, chunks)
    assert set(on.annotations) == {"kit"} and set(off.annotations) == {"bolt", "kit"}
