"""scripts/make_sample_documents.py and the real-format documents it wrote into the sample:
reproducible bytes, PDF metadata, the scanned page, parsing_truth.json against the drawn text, and
the new queries and judgements. The corpus ids are read with light code here, not the parsers."""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import re
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "make_sample_documents.py"
KB = ROOT / "rag_lab" / "sample" / "maintenance_kb"
DOCS = KB / "docs"
PDFS = ("manuals/hx200-manual-v1.pdf", "manuals/hx200-manual-v2.pdf")
NEW_CATEGORIES = {"table_cell", "scanned_page", "page_header"}


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_sample_documents", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.fixture(scope="module")
def truth() -> dict[str, Any]:
    return json.loads((KB / "parsing_truth.json").read_text(encoding="utf-8"))["documents"]


@pytest.fixture(scope="module")
def queries() -> dict[str, dict[str, Any]]:
    lines = (KB / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return {q["_id"]: q for q in map(json.loads, lines)}


@pytest.fixture(scope="module")
def qrels() -> dict[str, list[tuple[str, str, int]]]:
    out = {}
    for split in ("test", "dev"):
        with open(KB / "qrels" / f"{split}.tsv", encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        out[split] = [(r["query-id"], r["corpus-id"], int(r["score"])) for r in rows]
    return out


def test_generator_reproduces_the_committed_files(tmp_path: Path) -> None:
    pytest.importorskip("reportlab", reason="the generator renders the PDFs with reportlab")
    pytest.importorskip("docx", reason="the generator writes the DOCX with python-docx")
    module = load_script()
    missing = [str(p) for p in module.required_fonts() if not p.exists()]
    if missing:
        pytest.skip(f"fonts missing: {missing} (Debian: fonts-wqy-microhei, fonts-dejavu-core)")
    written = module.generate(tmp_path)
    assert set(written) == {*(f"docs/{p}" for p in truth_paths()), "parsing_truth.json"}
    for rel, path in written.items():
        assert sha256(path) == sha256(KB / rel), f"{rel} differs from the committed file"


def truth_paths() -> list[str]:
    doc = json.loads((KB / "parsing_truth.json").read_text(encoding="utf-8"))
    return list(doc["documents"])


def front_matter(path: Path) -> dict[str, Any]:
    import yaml

    head = path.read_text(encoding="utf-8").split("---\n", 2)[1]
    return yaml.safe_load(head)


def test_pdfs_carry_the_front_matter_as_info_keys() -> None:
    pdfplumber = pytest.importorskip("pdfplumber")
    for rel in PDFS:
        fm = front_matter(ROOT / "scripts" / "sample_sources" / rel.replace(".pdf", ".md"))
        with pdfplumber.open(DOCS / rel) as pdf:
            meta = pdf.metadata
        assert meta["Title"] == fm["title"]
        assert meta["Author"] == "rag_lab sample"
        assert meta["doc_id"] == fm["doc_id"] == Path(rel).stem
        assert meta["version"] == fm["version"]
        assert meta["doc_type"] == fm["doc_type"] and meta["language"] == fm["language"]
        assert meta["entities"] == ", ".join(fm["entities"])
        assert meta["valid_from"] == fm["valid_from"].isoformat()
        if fm["valid_to"] is None:
            assert "valid_to" not in meta
        else:
            assert meta["valid_to"] == fm["valid_to"].isoformat()


def test_scanned_page_has_no_text_layer_and_the_others_do(truth: dict[str, Any]) -> None:
    pdfplumber = pytest.importorskip("pdfplumber")
    kinds = {}
    for rel in PDFS:
        with pdfplumber.open(DOCS / rel) as pdf:
            assert len(pdf.pages) == truth[rel]["page_count"]
            for page, record in zip(pdf.pages, truth[rel]["pages"], strict=True):
                kinds[(rel, record["page"])] = record["kind"]
                if record["kind"] == "scanned":
                    assert not page.chars, f"{rel} page {record['page']} has a text layer"
                    assert len(page.images) == 1
                else:
                    assert page.chars
    assert [k for k, v in kinds.items() if v == "scanned"] == [(PDFS[0], 6)]


def test_truth_lines_and_running_headers_are_what_the_pdf_shows(truth: dict[str, Any]) -> None:
    pdfplumber = pytest.importorskip("pdfplumber")
    for rel in PDFS:
        doc = truth[rel]
        with pdfplumber.open(DOCS / rel) as pdf:
            for page, record in zip(pdf.pages, doc["pages"], strict=True):
                if record["kind"] == "scanned":
                    continue
                lines = page.extract_text().splitlines()
                assert lines[0] == record["header"] == doc["header"]
                assert squash(lines[-1]) == squash(doc["footer"].format(page=record["page"]))
                assert squash(record["footer"]) == squash(lines[-1])
                body = lines[1:-1]
                for line in record["lines"]:  # drawn lines come back whole and in order
                    assert line in body, (rel, record["page"], line)
                    body = body[body.index(line) + 1 :]


def test_a_table_crosses_a_page_break_and_repeats_its_header(truth: dict[str, Any]) -> None:
    pdfplumber = pytest.importorskip("pdfplumber")
    for rel in PDFS:
        crossing = [t for t in truth[rel]["tables"] if len(t["pages"]) > 1]
        assert len(crossing) == 1
        table = crossing[0]
        first, second = table["pages"]
        assert second == first + 1 and table["caption"] == "表 5-1 维护零件清单"
        assert table["row_pages"].count(second) >= 10  # many rows sit on the continuation page
        assert 30 <= len(table["rows"]) - 1 <= 45
        with pdfplumber.open(DOCS / rel) as pdf:
            lines = pdf.pages[second - 1].extract_text().splitlines()
        assert lines[1] == " ".join(table["rows"][0])  # the repeated header row


def truth_strings(doc: dict[str, Any]) -> list[str]:
    """Every string parsing_truth.json records for one document."""
    out = [doc.get("header", ""), doc.get("footer", "")]
    for page in doc.get("pages", []):
        out += [page["header"], page["footer"], *page["lines"]]
    out += [h["text"] for h in doc.get("headings", [])]
    for table in doc.get("tables", []):
        out += [table["caption"] or "", *(c for row in table["rows"] for c in row)]
    return out


def test_new_queries_are_answered_by_the_new_content(
    truth: dict[str, Any], queries: dict[str, dict[str, Any]], qrels: dict[str, list]
) -> None:
    by_id = {doc["doc_id"]: doc for doc in truth.values() if "doc_id" in doc}
    new = {qid: q for qid, q in queries.items() if q["metadata"]["category"] in NEW_CATEGORIES}
    assert len(new) == 15 and min(new) == "q097"
    split_of = {qid: split for split, rows in qrels.items() for qid, _, _ in rows}
    assert sum(split_of[q] == "test" for q in new) == 10
    for qid, q in new.items():
        grade2 = [d for split in qrels.values() for x, d, s in split if x == qid and s == 2]
        assert grade2, qid
        for answer in q["metadata"]["answers"]:
            assert any(answer in s for d in grade2 for s in truth_strings(by_id[d])), (qid, answer)


def corpus_ids() -> list[str]:
    """Document ids of the whole corpus, one per document, read from each format directly."""
    ids: list[str] = []
    for path in sorted(DOCS.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if path.suffix == ".md":
            ids += re.findall(r"^doc_id: (\S+)$", data.decode().split("---\n", 2)[1], re.M)
        elif path.suffix == ".jsonl":
            ids += [json.loads(line)["_id"] for line in data.decode().splitlines() if line]
        elif path.suffix == ".pdf":
            import pdfplumber

            with pdfplumber.open(path) as pdf:
                ids.append(pdf.metadata["doc_id"])
        elif path.suffix == ".html":
            ids += re.findall(r'<meta name="doc_id" content="([^"]+)">', data.decode())
        elif path.suffix == ".docx":
            core = zipfile.ZipFile(path).read("docProps/core.xml").decode()
            ids += re.findall(r"<dc:identifier>([^<]+)</dc:identifier>", core)
        elif path.suffix == ".csv":
            ids += [r["id"] for r in csv.DictReader(data.decode("utf-8-sig").splitlines())]
        else:
            raise AssertionError(f"unexpected file in the corpus: {path}")
    return ids


def test_every_judged_document_exists_once(qrels: dict[str, list]) -> None:
    pytest.importorskip("pdfplumber")
    ids = corpus_ids()
    # 62 + the line-3 spares table, the electrical training notes and 3 line-3 tickets
    assert len(ids) == len(set(ids)) == 67  # nothing duplicated by the moved Markdown originals
    # the fallback chain's second corpus (standards/, not part of docs/) holds the rest
    standards = {p.stem for p in (DOCS.parent / "standards").glob("*.md")}
    assert not standards & set(ids)
    for split, rows in qrels.items():
        missing = {d for _, d, _ in rows} - set(ids) - standards
        assert not missing, (split, missing)


def test_ticket_export_is_an_excel_style_csv(truth: dict[str, Any]) -> None:
    data = (DOCS / "tickets" / "ticket-export-2024.csv").read_bytes()
    assert data.startswith(b"\xef\xbb\xbfid,title,text,")
    rows = list(csv.DictReader(data.decode("utf-8-sig").splitlines(keepends=True)))
    assert [r["id"] for r in rows] == truth["tickets/ticket-export-2024.csv"]["ids"]
    assert 8 <= len(rows) <= 15
    assert any("\n" in r["text"] and "," in r["text"] for r in rows)
    jsonl = (DOCS / "tickets.jsonl").read_text(encoding="utf-8")
    assert not any(r["id"] in jsonl for r in rows)  # moved, not copied
