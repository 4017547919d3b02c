"""rag_lab.metrics.relevance: chunk run → document run, and evidence-level chunk labels."""

from __future__ import annotations

import pytest

from rag_lab.metrics import evidence_qrels, to_document_run
from rag_lab.types import Chunk, Query


def chunk(cid: str, text: str) -> Chunk:
    doc = cid.split("#")[0]
    return Chunk(cid, doc, text, 0, len(text))


def test_to_document_run_takes_max_chunk_score_and_deduplicates():
    run = {"q1": {"a#0": 0.2, "a#1": 0.9, "b#0": 0.5, "a#2": 0.1}, "q2": {"b#1": -1.0, "b#0": -3.0}}
    chunk_doc = {c: c.split("#")[0] for c in ("a#0", "a#1", "a#2", "b#0", "b#1")}
    out = to_document_run(run, chunk_doc)
    assert out == {"q1": {"a": 0.9, "b": 0.5}, "q2": {"b": -1.0}}
    assert run["q1"]["a#0"] == 0.2 and len(run["q1"]) == 4  # input not mutated


@pytest.fixture
def evidence_case():
    chunks = {
        # full-width digits, spaces
        "d1#0": chunk("d1#0", "Fault E102: stop when oil exceeds ７０   °C."),
        "d1#1": chunk("d1#1", "Check the cooling fan."),
        # the answer, but the document is not judged relevant
        "d2#0": chunk("d2#0", "The spindle alarm fires at 70 °c too."),
        "d3#0": chunk("d3#0", "Nothing relevant here."),
    }
    queries = {
        "q1": Query("q1", "E102 temperature?", {"answers": ["70 °C"]}),
        "q2": Query("q2", "no gold strings", {"category": "unanswerable"}),
        "q3": Query("q3", "fan", {"evidence": "COOLING\nfan"}),
    }
    run = {
        "q1": {"d1#0": 0.9, "d1#1": 0.8, "d2#0": 0.7, "d3#0": 0.1},
        "q2": {"d1#0": 1.0},
        "q3": {"d3#0": 0.9, "d1#1": 0.5},
    }
    qrels = {"q1": {"d1": 2, "d2": 0}, "q2": {"d1": 0}, "q3": {"d1": 1}}
    return run, chunks, queries, qrels


def test_evidence_match_is_nfkc_case_and_whitespace_insensitive(evidence_case):
    run, chunks, queries, qrels = evidence_case
    labels = evidence_qrels(run, chunks, queries, qrels, depth=10)
    assert labels["q1"] == {"d1#0": 1}
    assert labels["q3"] == {"d1#1": 1}  # "COOLING\nfan" matches "cooling fan"


def test_evidence_restricted_to_relevant_docs(evidence_case):
    run, chunks, queries, qrels = evidence_case
    labels = evidence_qrels(run, chunks, queries, qrels, depth=10, within_relevant_docs=True)
    assert "d2#0" not in labels["q1"]
    unrestricted = evidence_qrels(run, chunks, queries, qrels, depth=10, within_relevant_docs=False)
    assert unrestricted["q1"] == {"d1#0": 1, "d2#0": 1}
    # without qrels nothing restricts either
    assert evidence_qrels(run, chunks, queries, None, depth=10)["q1"] == {"d1#0": 1, "d2#0": 1}


def test_queries_without_evidence_are_absent(evidence_case):
    run, chunks, queries, qrels = evidence_case
    labels = evidence_qrels(run, chunks, queries, qrels, depth=10)
    assert "q2" not in labels
    assert set(labels) == {"q1", "q3"}
    # a query with evidence but no matching chunk is present, with no labels; so is one the run
    # lacks (nothing retrieved): it is scored as a miss, never skipped
    run2 = {"q1": {"d3#0": 1.0}}
    labels = evidence_qrels(run2, chunks, queries, qrels, depth=10, within_relevant_docs=False)
    assert labels == {"q1": {}, "q3": {}}


def test_evidence_only_looks_at_top_depth(evidence_case):
    run, chunks, queries, qrels = evidence_case
    unrestricted = evidence_qrels(run, chunks, queries, qrels, depth=2, within_relevant_docs=False)
    assert unrestricted["q1"] == {"d1#0": 1}  # d2#0 is third
