"""Hostile scans (issue 32, items 3 and 4), through the real command where a count is promised:
a garbage text layer over a readable scan, a scanned table pasted into a digital page, a table
scanned on its side."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rag_lab.parser import _ocr
from rag_lab.parser._builder import markdown_tables
from rag_lab.parser.pdf import PdfParser
from rag_lab.types import Document
from tests.parser import pdf_fixtures as F
from tests.reliability.test_hostile_documents import kb, run_in_process


def _ready() -> bool:
    if shutil.which("tesseract") is None or not (F.have_cjk_font() and F.SANS_FONT.is_file()):
        return False
    try:
        _ocr.check_tesseract("eng+chi_sim+osd")
    except (_ocr.TesseractMissing, _ocr.LanguageMissing):
        return False
    return True


pytestmark = pytest.mark.skipif(
    not _ready(),
    reason="needs Tesseract with eng, chi_sim and osd and the fixture fonts "
    "(scripts/install_system_deps.sh)",
)


def parse(path: Path, **options) -> Document:
    [doc] = PdfParser(**options).parse(path, path.parent)
    return doc


def cells_read(doc: Document, want: list[list[str]]) -> int:
    tables = markdown_tables(doc.text)
    got = {c for t in tables for row in t for c in row}
    return sum(1 for row in want for c in row if c in got)


# -- 3: a garbage text layer over a readable scan -------------------------------------------------


def test_garbage_text_layer_over_a_scan_is_read_by_ocr_and_counted(tmp_path):
    root = kb(tmp_path / "kb")
    pdf, layer = F.garbage_layer_scan_pdf(root / "docs" / "alarm.pdf")
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "spindle overheating E417"}\n')
    (root / "qrels" / "test.tsv").write_text("q1\talarm\t1\n")
    metrics, report = run_in_process(root, tmp_path)
    # before: the document's text was the layer's 1,503 random characters, n_ocr_pages 0
    assert metrics["ingest/n_garbled_layer_pages"] == 1 and metrics["ingest/n_ocr_pages"] == 1
    assert metrics["ingest/n_text_layer_pages"] == 0
    [row] = [d for d in report["documents"] if d["doc_id"] == "alarm"]
    assert row["garbled_layer_page_numbers"] == [1] and row["ocr_page_numbers"] == [1]
    assert metrics["hit_rate_at_1"] == 1.0  # the scan's words are what is indexed
    doc = parse(pdf)
    assert doc.text.startswith(F.ALARM_LINES[0]), doc.text
    for line in F.ALARM_LINES[1:]:
        assert line.split()[-2] in doc.text  # "fan", "40", "one"
    assert not any(w in doc.text for w in layer.split()[:20] if len(w) > 3)
    assert doc.sections[0].metadata["ocr"] is True


def test_garbage_layer_with_ocr_off_is_kept_and_still_counted(tmp_path):
    pdf, layer = F.garbage_layer_scan_pdf(tmp_path / "alarm.pdf")
    doc = parse(pdf, ocr="off")
    assert doc.stats["garbled_layer_pages"] == 1 and doc.stats["ocr_pages"] == 0
    assert layer.split()[0] in doc.text
    off = parse(pdf, text_layer_min_readable=0)  # the check turned off: the layer, uncounted
    assert off.stats["garbled_layer_pages"] == 0 and layer.split()[0] in off.text


def test_a_scanned_table_pasted_into_a_digital_page_is_read(tmp_path):
    pdf = F.pasted_scan_pdf(tmp_path / "pasted.pdf")
    doc = parse(pdf)
    # before: the page's text layer only, the table lost
    assert cells_read(doc, F.PASTED_TABLE) == 9
    assert doc.stats["ocr_images"] == 1 and doc.stats["text_layer_pages"] == 1
    assert doc.stats["ocr_pages"] == 0  # the page's own text stays the text layer's
    text = doc.text
    order = [text.index(F.DIGITAL_TEXT[0]), text.index("| Part |"), text.index("Check the seal")]
    assert order == sorted(order)  # the table where the image is
    assert parse(pdf, ocr_images=False).stats["tables"] == 0


# -- 4: a table scanned on its side ---------------------------------------------------------------


@pytest.mark.parametrize("angle", [90, 270])
def test_a_table_scanned_on_its_side_is_read_upright(tmp_path, angle):
    pdf = F.rotated_table_scan_pdf(tmp_path / f"table{angle}.pdf", angle)
    doc = parse(pdf)
    # before: junk such as "| 所 O 已忆 < 民 | 〇口 3 e 广 |" stored as a table
    assert cells_read(doc, F.ROTATED_TABLE) == 12, doc.text
    assert doc.stats["rotated_ocr"] == 1 and doc.stats["weak_ocr_tables"] == 0


def test_upright_table_is_not_turned(tmp_path):
    doc = parse(F.rotated_table_scan_pdf(tmp_path / "table0.pdf", 0))
    assert cells_read(doc, F.ROTATED_TABLE) == 12 and doc.stats["rotated_ocr"] == 0


def test_a_table_read_as_junk_is_kept_out_of_table_structure_and_counted(tmp_path):
    root = kb(tmp_path / "kb")
    F.rotated_table_scan_pdf(root / "docs" / "table90.pdf", 90)
    metrics, report = run_in_process(root, tmp_path, "parser.parsers.pdf.ocr_orientation=false")
    assert metrics["ingest/n_weak_ocr_tables"] == 1 and metrics["ingest/n_tables"] == 0
    [row] = [d for d in report["documents"] if d["doc_id"] == "table90"]
    assert row["weak_ocr_tables"] == 1
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert written["ingest/n_weak_ocr_tables"] == 1


def test_a_table_image_on_its_side_in_a_digital_page_is_read_upright(tmp_path):
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen.canvas import Canvas

    F.register_fonts()
    path = tmp_path / "side.pdf"
    c = Canvas(str(path), pagesize=A4, invariant=1)
    c.setFont("WQY", 10.5)
    c.drawString(72, A4[1] - 90, "A digital page with a table scanned on its side below.")
    table = F.ruled_table_image(F.ROTATED_TABLE).rotate(90, expand=True)
    w, h = table.width * 72 / 300, table.height * 72 / 300
    c.drawImage(ImageReader(table), 72, A4[1] - 110 - h, width=w, height=h)
    c.drawString(72, A4[1] - 130 - h, "Text after the table.")
    c.showPage()
    c.save()
    doc = parse(path)
    assert cells_read(doc, F.ROTATED_TABLE) == 12, doc.text
    assert doc.stats["ocr_images"] == 1 and doc.stats["rotated_ocr"] == 1
    assert (
        doc.text.index("A digital page")
        < doc.text.index("| Code |")
        < doc.text.index("Text after the table.")
    )


def test_an_image_repeated_on_every_page_is_read_once(tmp_path):
    """A logo or a watermark (one image object drawn on each page) is not a pasted scan: OCR
    reads it on its first page only (a 500-page manual must not OCR its logo 500 times)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen.canvas import Canvas

    F.register_fonts()
    path = tmp_path / "logo.pdf"
    image = ImageReader(F.ruled_table_image(F.PASTED_TABLE))
    c = Canvas(str(path), pagesize=A4, invariant=1)
    for page in range(3):
        c.setFont("WQY", 10.5)
        c.drawString(72, A4[1] - 120, f"Page {page + 1} of the manual has its own text.")
        c.drawImage(image, 72, A4[1] - 300, width=200, height=80)
        c.showPage()
    c.save()
    doc = parse(path)
    assert doc.stats["ocr_images"] == 1 and doc.stats["tables"] == 1


def test_without_tesseract_unreadable_layers_and_images_are_kept_as_they_are(tmp_path, monkeypatch):
    """OCR that would improve a page is not a need: without Tesseract such pages keep their text
    layer (still counted) and the run goes on; only a page with no text layer stops it."""

    def missing(languages: str) -> None:
        raise _ocr.TesseractMissing("tesseract")

    monkeypatch.setattr(_ocr, "check_tesseract", missing)
    pdf, layer = F.garbage_layer_scan_pdf(tmp_path / "alarm.pdf")
    doc = parse(pdf)
    assert doc.stats["garbled_layer_pages"] == 1 and doc.stats["ocr_pages"] == 0
    assert layer.split()[0] in doc.text
    pasted = parse(F.pasted_scan_pdf(tmp_path / "pasted.pdf"))
    assert pasted.stats["ocr_images"] == 0 and F.DIGITAL_TEXT[0] in pasted.text
