"""The sample's second corpus (``standards/``, the fallback chain's second level) and the
``standards`` queries only it answers: each answer is written in its judged standards document
and in no document of the main corpus, and the main corpus never names a standards document."""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from pathlib import Path

import yaml

KB = Path(__file__).resolve().parents[2] / "rag_lab" / "sample" / "maintenance_kb"


def norm(text: str) -> str:  # the evidence matching's normalisation (NFKC, case folding)
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def standards_queries() -> dict[str, dict]:
    lines = (KB / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return {q["_id"]: q for q in map(json.loads, lines) if q["metadata"]["category"] == "standards"}


def judged() -> dict[str, tuple[str, str]]:
    out = {}
    for split in ("test", "dev"):
        for line in (KB / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]:
            q, d, _ = line.split("\t")
            out[q] = (split, d)
    return out


def test_standards_corpus_and_query_counts() -> None:
    docs = sorted((KB / "standards").glob("*.md"))
    assert len(docs) == 11
    for path in docs:  # doc_id is the file name: chunk ids cannot collide with the main corpus
        meta = yaml.safe_load(path.read_text(encoding="utf-8").split("---")[1])
        assert meta["doc_id"] == path.stem and meta["doc_id"].startswith("std-")
        assert meta["source"] == "public-standards"
    qs, rel = standards_queries(), judged()
    assert Counter(rel[q][0] for q in qs) == {"test": 7, "dev": 4}


def test_only_the_standards_corpus_answers_them() -> None:
    main = [
        norm(p.read_text(encoding="utf-8", errors="ignore"))
        for p in (KB / "docs").rglob("*")
        if p.is_file() and p.suffix in (".md", ".jsonl", ".csv", ".html")
    ]
    rel = judged()
    for qid, q in standards_queries().items():
        doc = rel[qid][1]
        body = norm((KB / "standards" / f"{doc}.md").read_text(encoding="utf-8"))
        for answer in q["metadata"]["answers"]:
            assert norm(answer) in body, (qid, answer)
            assert not any(norm(answer) in text for text in main), (qid, answer)
    assert not (KB / "docs" / "standards").exists()  # the main corpus folder stays docs/
