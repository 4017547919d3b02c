"""The sample's queries for the query-side stages: ``abbreviation`` (the answer is written only in
the other form), the colloquial ones a shop-floor dictionary should help, and ``version_as_of``
(the date is in the metadata, not the text, and only the edition valid on it is relevant)."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
KB = ROOT / "rag_lab" / "sample" / "maintenance_kb"
SOURCES = ROOT / "scripts" / "sample_sources"  # the Markdown originals of the generated files


def queries() -> dict[str, dict]:
    lines = (KB / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return {q["_id"]: q for q in map(json.loads, lines)}


def qrels() -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for split in ("test", "dev"):
        for line in (KB / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]:
            q, d, s = line.split("\t")
            out.setdefault(q, {})[d] = int(s)
    return out


def front_matter(doc_id: str) -> dict:
    path = next(p for p in [*KB.glob("docs/*/*.md"), *SOURCES.glob("*/*.md")] if p.stem == doc_id)
    return yaml.safe_load(path.read_text(encoding="utf-8").split("---")[1])


def test_counts_per_category_and_split() -> None:
    qs, rel = queries(), qrels()
    # categories added later have their own count tests (tests/sample/test_standards_queries.py)
    later = {q for q, x in qs.items() if x["metadata"]["category"] in ("standards", "conflict")}
    assert len(set(qs) - later) == 130 and set(rel) == set(qs)
    counts = Counter(q["metadata"]["category"] for q in qs.values())
    assert counts["abbreviation"] == 8 and counts["version_as_of"] == 7
    assert counts["colloquial"] == 20
    test = (KB / "qrels" / "test.tsv").read_text().splitlines()[1:]
    assert len({line.split("\t")[0] for line in test} - later) == 89


def test_the_abbreviation_table_writes_only_the_full_forms() -> None:
    text = (KB / "docs/manuals/line3-electrical-spares-zh.md").read_text(encoding="utf-8")
    body = text.split("---", 2)[2]
    assert "可编程逻辑控制器输入输出模块" in body
    assert not re.search(r"PLC|I/?O\b|VFD|HMI|UPS|CPU", body)
    # the definitions the mined dictionary needs live in other documents
    training = (KB / "docs/manuals/electrical-basics-training-zh.md").read_text(encoding="utf-8")
    assert "可编程逻辑控制器（PLC）" in training and "HMI（人机界面）" in training


def test_as_of_queries_judge_only_what_is_valid_on_their_date() -> None:
    qs, rel = queries(), qrels()
    dated = {q: x for q, x in qs.items() if x["metadata"]["category"] == "version_as_of"}
    texts = Counter(x["text"] for x in dated.values())
    assert max(texts.values()) == 2  # the same question asked on two dates
    for qid, q in dated.items():
        day = dt.date.fromisoformat(q["metadata"]["as_of"])
        assert not re.search(r"20\d\d|第\d版|v\d|firmware \d", q["text"])  # no date in the text
        for doc, grade in rel[qid].items():
            meta = front_matter(doc)
            start, end = meta["valid_from"], meta.get("valid_to") or dt.date.max
            assert grade > 0 and start <= day <= end, (qid, doc)
