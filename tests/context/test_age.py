"""Freshness warnings in the context: chunks older than their source type's limit carry
"published N days ago" into the generator's block header, by the age rule source health uses,
counted per query."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pytest

from rag_lab.context import AgeWarning, ContextStage
from rag_lab.context.age import STALE_FIELD, stale_count
from rag_lab.contract.age import AgeRule
from rag_lab.generator.context import build_context
from rag_lab.types import Chunk
from rag_lab.validate import OptionError


def chunk(cid: str, **meta: object) -> Chunk:
    return Chunk(cid, cid.split("#")[0], "E102 oil too hot: clean the cooler.", 0, 9, "", "", meta)


TODAY = "2024-12-31"
CHUNKS = [
    chunk("ticket#0", source_type="ticket", opened="2023-11-15"),  # 412 days: over 365
    chunk("manual#0", source_type="manual", valid_from="2023-07-01"),  # 549 days: under 1095
    chunk("wiki#0", source_type="wiki", updated="2024-01-01"),  # 365 days: over default 180
    chunk("undated#0", source_type="ticket"),  # no date: no warning
]
LIMITS = {"default": 180, "ticket": 365, "manual": 1095}


def test_stale_chunks_carry_their_age_and_nothing_else_changes():
    stage = AgeWarning(LIMITS, today=TODAY)
    assert isinstance(stage, ContextStage)
    out = stage.apply("E102", CHUNKS)
    assert [c.chunk_id for c in out] == [c.chunk_id for c in CHUNKS]
    assert [c.metadata.get(STALE_FIELD) for c in out] == [412, None, 365, None]
    assert [c.text for c in out] == [c.text for c in CHUNKS]
    assert STALE_FIELD not in CHUNKS[0].metadata  # the input is not mutated
    assert stale_count(out) == 2
    assert stage.stats == {"stale_per_query": 2.0, "queries_with_stale": 1.0, "stale_share": 0.5}


def test_the_rule_is_source_healths_own():
    """The same AgeRule decides (one definition of too old for serve, health and the context)."""
    rule, today = AgeRule(LIMITS), dt.date.fromisoformat(TODAY)
    out = AgeWarning(LIMITS, today=TODAY).apply("q", CHUNKS)
    assert [c.metadata.get(STALE_FIELD) is not None for c in out] == [
        rule.stale(c.metadata, today) for c in CHUNKS
    ]


def test_the_warning_reaches_the_block_header_in_the_querys_language():
    out = AgeWarning(LIMITS, today=TODAY).apply("q", CHUNKS[:2])
    text, used = build_context(out, 500, "en")
    first, second = text.split("\n\n")
    assert first.splitlines()[0].endswith("| warning: published 412 days ago")
    assert "warning" not in second
    zh, _ = build_context(out, 500, "zh")
    assert "警告：发布于412天前" in zh.splitlines()[0]


def test_today_defaults_to_the_run_date_and_must_be_a_date():
    fresh = chunk("t#0", source_type="ticket", opened=dt.date.today().isoformat())
    assert AgeWarning(LIMITS).apply("q", [fresh])[0].metadata.get(STALE_FIELD) is None
    with pytest.raises(OptionError, match="today"):
        AgeWarning(LIMITS, today="yesterday")


def test_warnings_are_counted_per_query(tmp_path):
    """context=[age] with the extractive generator on a small corpus (one old ticket, one recent
    manual): the metric and the per-query column; without the stage, neither."""
    import json

    from rag_lab.evaluate import evaluate
    from tests.compose import compose_evaluate

    root = tmp_path / "kb"
    (root / "qrels").mkdir(parents=True)
    docs = [
        (
            "t1",
            "HX-200 E102 ticket",
            "E102 again: the cooler was blocked.",
            "ticket",
            {"opened": "2023-11-15"},
        ),
        (
            "m1",
            "HX-200 manual",
            "E102 means the oil is too hot; clean the cooler.",
            "manual",
            {"version": "2", "valid_from": "2024-06-01"},
        ),
        (
            "m2",
            "CH-30 manual",
            "E210 means high pressure in the condenser.",
            "manual",
            {"version": "1", "valid_from": "2024-06-01"},
        ),
    ]
    (root / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": i, "title": t, "text": x, "metadata": {"doc_type": k, **m}}) + "\n"
            for i, t, x, k, m in docs
        ),
        encoding="utf-8",
    )
    (root / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "E102 cooler"})
        + "\n"
        + json.dumps({"_id": "q2", "text": "E210 condenser pressure"})
        + "\n",
        encoding="utf-8",
    )
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\tm1\t1\nq2\tm2\t1\n", encoding="utf-8"
    )
    base = [
        "dataset=beir",
        f"dataset.path={root}",
        "retrievers=[bm25]",
        "tracking=none",
        "generator=extractive",
        "judge=lexical",
        "cache.dir=null",
        "evaluation.answer_k=2",
    ]
    cfg = compose_evaluate([*base, "context=[age]", f"context.age.today={TODAY}"], tmp_path)
    m = evaluate(cfg)
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet")
    stale = dict(zip(table.query_id, table.answer_stale_chunks))
    assert stale == {"q1": 1, "q2": 0}  # the 412-day-old ticket; the manuals are within 1095
    assert m["context/stale_chunks_per_query"] == 0.5 and m["context/queries_with_stale"] == 1
    # q1 read the ticket and m1, q2 only m2 (no other chunk shares a BM25 term with it)
    assert m["context/age/stale_share"] == pytest.approx(1 / 3)
    off = evaluate(compose_evaluate(base, tmp_path / "off"))
    assert "context/stale_chunks_per_query" not in off
