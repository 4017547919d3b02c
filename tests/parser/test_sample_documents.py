"""The shipped sample's PDFs, HTML and DOCX parsed against what the generator drew
(``parsing_truth.json``): table cells, the table crossing a page, the scanned page, the running
header, metadata. Real files, real OCR (skipped without Tesseract)."""

from __future__ import annotations

import json
import shutil

import pytest

from rag_lab.metrics.parsing import best_cell_accuracy, character_error_rate
from rag_lab.parser import DocxParser, HtmlParser, PdfParser, PlainPdfParser
from rag_lab.parser._builder import markdown_tables
from rag_lab.paths import SAMPLE_DIR

KB = SAMPLE_DIR / "maintenance_kb"
ROOT = KB / "docs"
TRUTH = json.loads((KB / "parsing_truth.json").read_text(encoding="utf-8"))["documents"]
needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="Tesseract not installed"
)


def parse(parser, rel):
    (doc,) = list(parser.parse(ROOT / rel, ROOT))
    return doc


def test_text_layer_manual_tables_headers_and_metadata():
    spec = TRUTH["manuals/hx200-manual-v2.pdf"]
    doc = parse(PdfParser(), "manuals/hx200-manual-v2.pdf")
    assert (
        doc.doc_id == "hx200-manual-v2" and doc.metadata["version"] == spec["metadata"]["version"]
    )
    assert doc.stats["pages"] == 6 and doc.stats["ocr_pages"] == 0
    tables = markdown_tables(doc.text)
    for t in spec["tables"]:  # every cell of every table, the page-crossing one included
        assert best_cell_accuracy(t["rows"], tables) == 1.0, t["caption"]
    crossing = next(s for s in doc.sections if s.metadata.get("caption") == "表 5-1 维护零件清单")
    assert crossing.metadata["pages"] == [4, 5] and crossing.metadata["kind"] == "table"
    assert doc.text.count("| 零件号 | 名称 | 规格 | 更换周期 |") == 1  # the repeated header dropped
    # the running header: out of every page's body, once at the top, in the metadata
    header = "HX-200 液压站维护手册 V2.0 · 文件编号 HX-MM-200-02"
    assert "".join(header.split()) in "".join(doc.metadata["page_header"][0].split())
    assert doc.text.count("HX-MM-200-02") == 1
    assert doc.sections[0].metadata["kind"] == "page_header"
    # headings become the section path, pages reach the sections
    paths = {s.path[-1] for s in doc.sections if s.path}
    assert {"2 技术参数", "3 故障代码", "5 备件"} <= paths
    # (page 5 holds only the continued table, a section of page 4 with pages [4, 5])
    assert {s.metadata.get("page") for s in doc.sections} >= {1, 2, 3, 4, 6}


def test_the_plain_baseline_flattens_tables_and_keeps_headers_on_every_page():
    doc = parse(PlainPdfParser(), "manuals/hx200-manual-v2.pdf")
    assert doc.doc_id == "hx200-manual-v2"
    assert markdown_tables(doc.text) == []
    assert doc.text.count("HX-MM-200-02") == 6


@needs_tesseract
def test_the_scanned_page_is_ocrd_alone():
    spec = TRUTH["manuals/hx200-manual-v1.pdf"]
    doc = parse(PdfParser(), "manuals/hx200-manual-v1.pdf")
    assert (doc.stats["text_layer_pages"], doc.stats["ocr_pages"]) == (5, 1)
    assert doc.stats["ocr_page_numbers"] == [6]
    scanned = [s for s in doc.sections if s.metadata.get("ocr")]
    assert scanned and {s.metadata["page"] for s in scanned} == {6}
    assert all(0 < s.metadata["confidence"] <= 1 for s in scanned)
    assert not any(s.metadata.get("ocr") for s in doc.sections if s.metadata.get("page") != 6)
    body = "\n".join(
        doc.text[s.start : s.end] for s in scanned if s.metadata.get("kind") != "table"
    )
    truth = "\n".join(spec["pages"][5]["lines"])
    assert character_error_rate(truth, body.replace("#", "")) <= 0.1  # measured 0.021
    assert "请勿外传" not in body  # the header and footer read from the image are taken out
    # the appendix table: measured 31 of 33 cells exact (weak cells re-read in chi_sim at
    # ocr_reread_dpi=180; 150-240 gave 30-31, no shrinking 29); issue 11's goal is 0.90
    (appendix,) = [t for t in spec["tables"] if 6 in t["pages"]]
    assert best_cell_accuracy(appendix["rows"], markdown_tables(doc.text)) >= 0.9


@needs_tesseract
def test_ocr_off_skips_the_scanned_page_and_counts_it():
    doc = parse(PdfParser(ocr="off"), "manuals/hx200-manual-v1.pdf")
    assert (doc.stats["ocr_pages"], doc.stats["ocr_skipped_pages"]) == (0, 1)
    assert not any(s.metadata.get("page") == 6 for s in doc.sections)


@pytest.mark.parametrize(
    "parser, rel",
    [
        (HtmlParser(), "release_notes/hx200-controller-firmware-2-1.html"),
        (DocxParser(), "manuals/loto-safety-procedure.docx"),
    ],
)
def test_html_and_docx_keep_headings_tables_and_drop_boilerplate(parser, rel):
    spec = TRUTH[rel]
    doc = parse(parser, rel)
    assert doc.doc_id == spec["doc_id"]
    for t in spec["tables"]:
        assert best_cell_accuracy(t["rows"], markdown_tables(doc.text)) == 1.0
    headings = {s.path[-1] for s in doc.sections if s.path}
    assert {h["text"] if isinstance(h, dict) else h for h in spec["headings"]} <= headings
    # page furniture (menus, cookie banner, footer); short items like "首页" also occur in the body
    furniture = [f for f in spec.get("boilerplate", []) if len(f) > 12]
    assert furniture or "boilerplate" not in spec
    for f in furniture:
        assert f not in doc.text
