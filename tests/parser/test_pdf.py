"""rag_lab.parser.pdf: text layer (symbols, subscripts, CJK), running headers/footers, ruled
tables (captions, merged cells, tables split over pages), headings, document-info metadata, OCR
of scanned pages (Tesseract), and one-line errors for bad input.

The PDFs are generated into a temporary folder by tests/parser/pdf_fixtures.py (reportlab,
Pillow), once per module. Only one page in the whole module is OCR'd (Tesseract is slow).
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from rag_lab.errors import ConfigError, DataError
from rag_lab.parser import _ocr
from rag_lab.parser._builder import markdown_tables
from rag_lab.parser._pdf_layout import strip_page_numbers
from rag_lab.parser.pdf import PdfParser, _info_metadata, _iso_date
from rag_lab.types import Document
from rag_lab.validate import OptionError
from tests.parser import pdf_fixtures as F

pytestmark = pytest.mark.skipif(
    not (F.have_cjk_font() and F.SANS_FONT.is_file()),
    reason=f"the fixtures need the fonts {F.CJK_FONT} and {F.SANS_FONT} (fonts-wqy-microhei, "
    "fonts-dejavu-core)",
)


def _tesseract_ready() -> bool:
    """Tesseract with the parser's default languages (eng, chi_sim) installed."""
    if shutil.which("tesseract") is None:
        return False
    try:
        _ocr.check_tesseract("eng+chi_sim")
    except (_ocr.TesseractMissing, _ocr.LanguageMissing):
        return False
    return True


needs_tesseract = pytest.mark.skipif(
    not _tesseract_ready(),
    reason="Tesseract with eng and chi_sim is not installed "
    "(apt-get install tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim)",
)

_CJK_SPACE = re.compile(r"[\u4e00-\u9fff，。：；] +[\u4e00-\u9fff，。：；]")


def parse(path: Path, **options: Any) -> Document:
    docs = list(PdfParser(**options).parse(path, path.parent))
    assert len(docs) == 1
    return docs[0]


def paragraphs(doc: Document) -> list[str]:
    return [p for p in doc.text.split("\n\n") if p.strip()]


def section_of(doc: Document, needle: str):
    at = doc.text.index(needle)
    sec = doc.section_at(at)
    assert sec is not None, needle
    return sec


def cer(got: str, want: str) -> float:
    """Character error rate: Levenshtein distance / len(want)."""
    prev = list(range(len(want) + 1))
    for i, a in enumerate(got, 1):
        cur = [i]
        for j, b in enumerate(want, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a != b)))
        prev = cur
    return prev[-1] / max(len(want), 1)


def cell_accuracy(got: list[list[str]], want: list[list[str]]) -> float:
    hits = sum(
        1
        for i, row in enumerate(want)
        for j, cell in enumerate(row)
        if i < len(got) and j < len(got[i]) and got[i][j] == cell
    )
    return hits / sum(len(r) for r in want)


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pdf")
    out = {
        "manual": F.manual_pdf(d / "manual.pdf"),
        "long": F.long_pdf(d / "long.pdf"),
        "split": F.split_no_header_pdf(d / "split.pdf"),
        "scanned": F.scanned_pdf(d / "scanned.pdf"),
        "image_only": F.scanned_pdf(d / "image_only.pdf", with_text_pages=False),
        "encrypted": F.encrypted_pdf(d / "encrypted.pdf"),
        "open_encrypted": F.encrypted_pdf(d / "open_encrypted.pdf", user_password=""),
        "zero": F.zero_page_pdf(d / "zero.pdf"),
        "blank": F.blank_pages_pdf(d / "blank.pdf", pages=3),
    }
    data = out["manual"].read_bytes()
    (d / "truncated.pdf").write_bytes(data[: len(data) // 2])
    out["truncated"] = d / "truncated.pdf"
    (d / "random.pdf").write_bytes(bytes((i * 7919 + 13) % 251 for i in range(4000)))
    out["random"] = d / "random.pdf"
    (d / "empty.pdf").write_bytes(b"")
    out["empty"] = d / "empty.pdf"
    return out


@pytest.fixture(scope="module")
def manual(pdfs: dict[str, Path]) -> Document:
    return parse(pdfs["manual"])


# ---------------------------------------------------------------- text layer


def test_body_text_symbols_subscripts_and_reading_order(manual: Document) -> None:
    paras = paragraphs(manual)
    for want in (F.POWER_TEXT, F.SYMBOLS, F.CHINESE, F.AFTER_TABLE, F.STEP_TEXT):
        assert want in paras, want  # exactly one paragraph, subscripts inline, symbols kept
    order = [manual.text.index(s) for s in (F.TITLE, F.POWER_TEXT, F.SYMBOLS, F.CHINESE)]
    order += [manual.text.index("| 额定压力 |"), manual.text.index(F.AFTER_TABLE)]
    order += [manual.text.index(F.SECTION), manual.text.index(F.STEP_TEXT)]
    assert order == sorted(order)
    assert not _CJK_SPACE.search(manual.text), _CJK_SPACE.search(manual.text)


def test_running_header_and_footer_removed_from_the_body(manual: Document) -> None:
    assert manual.stats["pages"] == 5
    assert manual.text.count(F.HEADER) == 1
    assert manual.text.count("内部资料") == 1
    assert not re.search(r"第 \d+ 页", manual.text)
    first = paragraphs(manual)[0]
    assert F.HEADER in first and "内部资料" in first
    assert manual.sections[0].metadata["kind"] == "page_header"
    assert manual.metadata["page_header"] == [F.HEADER]
    assert manual.metadata["page_footer"] == ["内部资料"]


def test_spec_table_cells_caption_page_and_merged_cell(manual: Document) -> None:
    tables = markdown_tables(manual.text)
    spec = [t for t in tables if t[0] == F.SPEC_TABLE[0]]
    assert len(spec) == 1
    assert cell_accuracy(spec[0], F.SPEC_TABLE) == 1.0 and len(spec[0]) == len(F.SPEC_TABLE)
    assert spec[0][-1] == ["备注", "出厂已校准", "出厂已校准"]  # the merged cell, both units
    sec = section_of(manual, "| 额定压力 |")
    assert sec.metadata["kind"] == "table"
    assert sec.metadata["caption"] == F.SPEC_CAPTION
    assert sec.metadata["page"] == 1 and sec.metadata["pages"] == [1]
    # the caption line is the table's bold caption, not also a paragraph; table text not in body
    assert manual.text.count(F.SPEC_CAPTION) == 1
    assert manual.text.count("额定压力") == 1


def test_table_split_over_two_pages_is_one_table(manual: Document) -> None:
    tables = [t for t in markdown_tables(manual.text) if t[0] == F.SPLIT_TABLE[0]]
    assert len(tables) == 1
    assert tables[0] == F.SPLIT_TABLE  # every row, the repeated header row once
    sec = section_of(manual, "| E100 |")
    assert sec.metadata["pages"] == [3, 4]
    assert sec.metadata["caption"] == F.SPLIT_CAPTION
    assert manual.stats["tables"] == 2


def test_table_continued_without_repeated_header(pdfs: dict[str, Path]) -> None:
    doc = parse(pdfs["split"])
    tables = markdown_tables(doc.text)
    assert tables == [F.SPLIT_TABLE, F.OTHER_TABLE]
    assert section_of(doc, "| E139 |").metadata["pages"] == [1, 2]
    other = section_of(doc, "| Seal kit |").metadata
    assert other["pages"] == [3] and other["caption"] == F.OTHER_CAPTION


def test_headings_become_section_paths_with_pages(manual: Document) -> None:
    sec = section_of(manual, F.STEP_TEXT)
    assert sec.path == (F.TITLE, F.CHAPTER, F.SECTION)
    assert sec.metadata["page"] == 2
    assert f"# {F.TITLE}" in manual.text and f"### {F.SECTION}" in manual.text
    assert section_of(manual, F.SYMBOLS).path == (F.TITLE, "1 Overview")
    assert section_of(manual, F.SYMBOLS).metadata["page"] == 1
    assert section_of(manual, "End of the manual.").metadata["page"] == 5
    assert manual.stats["sections"] == 6


def test_document_info_and_custom_keys(manual: Document) -> None:
    assert manual.doc_id == "hx200-manual"
    assert manual.title == F.TITLE
    meta = dict(manual.metadata)
    for key in ("version", "valid_from", "valid_to", "source_type", "doc_type", "language"):
        assert meta[key] == F.INFO_KEYS[key], key
    assert meta["author"] == "Service Dept"
    assert meta["creation_date"] == "2000-01-01T00:00:00+00:00"  # reportlab invariant=1
    assert "doc_id" not in meta and "empty_key" not in meta and "null_key" not in meta
    assert "subject" not in meta  # reportlab's placeholder "unspecified"
    assert meta["source"] == "manual.pdf"


def test_info_parsing_helpers() -> None:
    title, meta = _info_metadata(
        {"Title": "untitled", "Author": "anonymous", "/valid_to": b"2025-06-30", "x": "null"}
    )
    assert title == "" and meta == {"valid_to": "2025-06-30"}
    assert _iso_date("D:20240115093000+08'00'") == "2024-01-15T09:30:00+08:00"
    assert _iso_date("D:20240115") == "2024-01-15"
    assert _iso_date("D:2024") == "2024-01-01"
    assert _iso_date("D:20241345") == "D:20241345"  # not a date: kept as written
    assert strip_page_numbers("Page 3 of 12", "Page 4 of 12") == ""
    assert strip_page_numbers("- 3 -", "- 4 -") == ""
    assert strip_page_numbers("内部资料 第 3 页", None) == "内部资料"
    assert strip_page_numbers("Service Manual 3", "Service Manual 4") == "Service Manual"
    assert strip_page_numbers("HX-200 V2.1", "HX-200 V2.1") == "HX-200 V2.1"
    assert _ocr.join_lines(["液压泵在启动前", "必须检查", "油位"]) == "液压泵在启动前必须检查油位"
    assert _ocr.join_lines(["the pump", "must", "be bled"]) == "the pump must be bled"
    assert _ocr.join_lines(["model HX-", "200 ±2 ℃", "; done"]) == "model HX-200 ±2 ℃; done"
    assert _ocr.join_words(["液压", "泵", "在", "HX-200", "中"]) == "液压泵在 HX-200 中"


def test_title_falls_back_to_the_running_header(pdfs: dict[str, Path]) -> None:
    doc = parse(pdfs["long"])
    assert doc.title == F.HEADER
    assert doc.doc_id == "long"


# ---------------------------------------------------------------- scanned pages


@pytest.fixture(scope="module")
def scanned(pdfs: dict[str, Path]) -> tuple[Document, list[int]]:
    """The 3-page PDF with page 2 scanned, parsed with ocr=auto; the pages rendered for OCR."""
    import pdfplumber.page

    rendered: list[int] = []
    real_render = pdfplumber.page.Page.to_image
    real_ocr = _ocr.ocr_image

    def render(self: Any, *args: Any, **kwargs: Any) -> Any:
        rendered.append(self.page_number)
        return real_render(self, *args, **kwargs)

    calls: list[int] = []

    def ocr(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real_ocr(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pdfplumber.page.Page, "to_image", render)
        mp.setattr(_ocr, "ocr_image", ocr)
        doc = parse(pdfs["scanned"])
    assert len(calls) == len(rendered)
    return doc, rendered


@needs_tesseract
def test_scanned_page_is_ocrd_alone(scanned: tuple[Document, list[int]]) -> None:
    doc, rendered = scanned
    assert rendered == [2]  # text-layer pages 1 and 3 were never rendered nor OCR'd
    assert doc.stats["pages"] == 3
    assert doc.stats["text_layer_pages"] == 2
    assert doc.stats["ocr_pages"] == 1 and doc.stats["ocr_skipped_pages"] == 0
    assert 0 < doc.stats["ocr_confidence"] <= 1
    assert doc.section_at(doc.text.index("Page one")).metadata == {"page": 1}
    assert doc.section_at(doc.text.index("Page three")).metadata == {"page": 3}
    ocr_secs = [s for s in doc.sections if s.metadata.get("page") == 2]
    assert ocr_secs
    for sec in ocr_secs:
        assert sec.metadata["ocr"] is True
        assert 0 < sec.metadata["confidence"] <= 1


@needs_tesseract
def test_scanned_page_text_and_table_recovered(scanned: tuple[Document, list[int]]) -> None:
    doc, _ = scanned
    ocr_text = "\n\n".join(
        doc.text[s.start : s.end]
        for s in doc.sections
        if s.metadata.get("page") == 2 and s.metadata.get("kind") != "table"
    )
    paras = [p for p in ocr_text.split("\n\n") if p.strip()]
    english = " ".join(F.SCAN_LINES)
    got = min(paras, key=lambda p: cer(p, english))
    rate = cer(got, english)
    print(f"OCR English CER {rate:.3f}")
    assert rate <= 0.1, got
    assert min(cer(p, F.SCAN_AFTER) for p in paras) <= 0.1
    zh = min(cer(p, F.SCAN_CHINESE) for p in paras)
    print(f"OCR Chinese CER {zh:.3f}")
    assert zh <= 0.1, paras
    tables = markdown_tables(ocr_text) or markdown_tables(doc.text)
    assert len(tables) == 1
    acc = cell_accuracy(tables[0], F.SCAN_TABLE)
    print(f"OCR table cell accuracy {acc:.3f}")
    assert acc >= 0.9, tables[0]
    sec = section_of(doc, "| Part |")
    assert sec.metadata["kind"] == "table" and sec.metadata["ocr"] is True
    assert sec.metadata["pages"] == [2]
    # the larger, numbered line is a heading: level 1 + its two number parts
    assert f"### {F.SCAN_HEADING}" in doc.text
    assert section_of(doc, F.SCAN_AFTER).path == (F.SCAN_HEADING,)
    # the table's cells are not read again as page text
    assert doc.text.count("Filter") == 1


@needs_tesseract
def test_dense_scanned_page_read_in_parts_with_its_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of 38 lines of 9.5 pt mixed Chinese/English and a 3 x 7 ruled table: its text is
    read in two parts at once (the page-text pass twice), its cells in chi_sim, and it comes
    back with every cell and the body at a low character error rate (measured: 21/21 cells,
    CER 0.016; benchmarks/results/parsing.json)."""
    pdf, lines, tables = F.dense_scanned_pdf(tmp_path / "dense.pdf")
    calls: list[tuple[str, int]] = []
    real = _ocr._tesseract_data

    def spy(image: Any, lang: str, psm: int, dpi: int | None = None) -> Any:
        calls.append((lang, psm))
        return real(image, lang, psm, dpi)

    monkeypatch.setattr(_ocr, "_tesseract_data", spy)
    doc = parse(pdf)
    assert calls.count(("chi_sim", 4)) == 2 and ("chi_sim", 6) in calls
    assert not any("+" in lang for lang, _ in calls)  # one model per call
    from rag_lab.metrics import parsing  # NFKC, whitespace ignored: "（" read as "(" is right

    tables_read = markdown_tables(doc.text)
    assert len(tables_read) == 1
    assert parsing.cell_accuracy(tables[0], tables_read[0]) >= 0.9, tables_read[0]
    body = "\n".join(
        doc.text[s.start : s.end] for s in doc.sections if s.metadata.get("kind") != "table"
    )
    body = "\n".join(line.lstrip("#").strip() for line in body.splitlines())
    rate = parsing.character_error_rate("\n".join(lines), body)
    print(f"dense page: CER {rate:.3f}")
    assert rate <= 0.03
    assert 0.8 < doc.stats["ocr_confidence"] <= 1


def test_weak_readings_are_read_again_cells_in_the_primary_language_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Weak readings are redone and the more confident reading kept: weak cells in the primary
    language at a second resolution first; what is still weak in each other language, unless the
    reading holds CJK characters and that language cannot write them (``eng``)."""
    word = _ocr._Word
    # an English line chi_sim read weakly: eng reads it right
    english_weak = _ocr._Reading(
        [[word("Scanned", 0, 0, 9, 9, 91.0), word("page'", 0, 0, 9, 9, 16.0)]]
    )
    english = _ocr._Reading([[word("Scanned", 0, 0, 9, 9, 95.0), word("page:", 0, 0, 9, 9, 95.0)]])
    # a confident mean (0.79) hiding one garbled word: "滤芯" read "滤必" (0.52)
    chinese_weak = _ocr._Reading([[word("更换", 0, 0, 9, 9, 93.0), word("滤必", 0, 0, 9, 9, 52.0)]])
    chinese = _ocr._Reading([[word("更换", 0, 0, 9, 9, 93.0), word("滤芯", 0, 0, 9, 9, 90.0)]])
    # a short Latin cell chi_sim misread at 180 dpi ("E113" → "上 13", measured on a dense scan),
    # read right at 300 dpi; eng is not asked (上 is a character it cannot write)
    code_weak = _ocr._Reading([[word("上", 0, 0, 9, 9, 5.0), word("13", 0, 0, 9, 9, 15.0)]])
    code = _ocr._Reading([[word("E113", 0, 0, 9, 9, 92.0)]])
    fine = _ocr._Reading([[word("停泵", 0, 0, 9, 9, 95.0)]])
    asked: list[tuple[tuple[str, ...], str, float]] = []
    answers = {
        ("line0", "eng"): english,
        ("cell1", "chi_sim"): chinese,
        ("cell2", "chi_sim"): code,
    }

    def read_strip(crops: list[Any], lang: str, scale: float, dpi: int | None) -> list[Any]:
        asked.append((tuple(crops), lang, scale))
        return [answers.get((c, lang), code_weak) for c in crops]

    monkeypatch.setattr(_ocr, "_read_strip", read_strip)
    out = _ocr._reread_weak(
        [english_weak, chinese_weak, code_weak, fine],
        ["line0", "cell1", "cell2", "cell3"],  # type: ignore[list-item]
        "chi_sim+eng",
        0.6,
        in_primary=[False, True, True, True],
    )
    assert [r.text for r in out] == ["Scanned page:", "更换滤芯", "E113", "停泵"]
    # weak cells again in chi_sim; in eng only the weak reading without CJK characters
    assert asked == [(("cell1", "cell2"), "chi_sim", 0.6), (("line0",), "eng", 0.6)]
    asked.clear()
    assert _ocr._reread_weak([chinese_weak], ["c"], "chi_sim") == [chinese_weak]  # type: ignore[list-item]
    assert asked == []  # no other language, no primary re-read asked: nothing to run


def test_degree_sign_misread_by_chi_sim_is_restored() -> None:
    word = _ocr._Word
    for read, fixed in [
        ("70*C，", "70°C，"),
        ('65 "C )', "65 °C )"),
        ("65。C", "65°C"),
        ("40 “C。", "40 °C。"),
        ("5 ”F", "5 °F"),
    ]:
        assert _ocr._Reading([[word(read, 0, 0, 9, 9, 90.0)]]).text == fixed
    for kept in ('he said "Come"', "3 *Cat", "A*C", "E*CS"):
        assert _ocr._Reading([[word(kept, 0, 0, 9, 9, 90.0)]]).text == kept


def test_dense_page_text_is_cut_at_a_paragraph_gap_for_two_processes() -> None:
    """A page whose text outweighs its tables is read in two parts at once, cut in the widest
    blank band near the point that balances the two processes."""
    import numpy as np

    page = np.full((1000, 200), 255, dtype=np.uint8)
    # 10 + 15 lines 20 pixels tall, 10 apart, the paragraph gap between them at rows 390-460
    for top in [*range(100, 400, 30), *range(460, 900, 30)]:
        page[top : top + 20, 20:180] = 0
    # half the ink lies at row ~520, in the second paragraph: the cut moves to the gap's middle
    assert _ocr._parts(page, 0, 300, 2) == [(0, 425), (425, 1000)]
    assert _ocr._parts(page, 0, 300, 1) == [(0, 1000)]  # one process: one part
    ink = int((page < _ocr._INK).sum())
    assert _ocr._parts(page, ink // 2 + 1, 300, 2) == [(0, 1000)]  # the cells weigh as much
    blank = np.full((1000, 200), 255, dtype=np.uint8)
    assert _ocr._parts(blank, 0, 300, 2) == [(0, 1000)]


def test_strip_crops_are_shrunk_before_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """``scale`` < 1 shrinks every crop before the strip is built: the image Tesseract gets is
    the shrunk crops plus the fixed padding and gaps, at the shrunk resolution."""
    from PIL import Image

    sizes: list[tuple[int, int]] = []
    dpis: list[int | None] = []

    def data(image: Any, lang: str, psm: int, dpi: int | None) -> dict[str, list[Any]]:
        sizes.append(image.size)
        dpis.append(dpi)
        return {
            k: []
            for k in (
                "text",
                "block_num",
                "par_num",
                "line_num",
                "left",
                "top",
                "width",
                "height",
                "conf",
            )
        }

    monkeypatch.setattr(_ocr, "_tesseract_data", data)
    crops = [Image.new("L", (400, 100), 255), Image.new("L", (200, 60), 255)]
    assert len(_ocr._read_strip(crops, "chi_sim", 0.5, 300)) == 2
    assert len(_ocr._read_strip(crops, "chi_sim")) == 2
    pad, gap = _ocr._PAD, _ocr._GAP
    assert sizes == [(200 + 2 * pad, 50 + 30 + gap + 2 * pad), (400 + 2 * pad, 160 + gap + 2 * pad)]
    assert dpis == [150, None]  # Tesseract is told the shrunk strip's resolution


def test_parallel_ocr_keeps_page_order_and_names_a_failing_page(
    pdfs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages are recognised by two workers at once; the first page finishes last, and the
    document still reads page 1, 2, 3 with each page's metadata."""
    import threading

    lock = threading.Lock()
    started: list[int] = []

    def fake_ocr(image: Any, languages: str, dpi: int, **kwargs: Any) -> _ocr.OcrPage:
        with lock:
            started.append(len(started) + 1)
            n = started[-1]
        time.sleep(0.3 if n == 1 else 0.01)
        line = _ocr.OcrLine(f"Text of scanned page {n}.", 100, 110, 72, 300, 10, 0.5 + n / 10)
        return _ocr.OcrPage([[line]], [], 0.5 + n / 10, 5)

    monkeypatch.setattr(_ocr, "check_tesseract", lambda languages: None)
    monkeypatch.setattr(_ocr, "ocr_image", fake_ocr)
    # no orientation pass: real Tesseract OSD before the fake would reorder the calls' starts
    doc = parse(pdfs["blank"], ocr_workers=2, ocr_orientation=False)
    assert paragraphs(doc) == [f"Text of scanned page {n}." for n in (1, 2, 3)]
    for n in (1, 2, 3):
        meta = section_of(doc, f"page {n}.").metadata
        assert meta == {"page": n, "ocr": True, "confidence": 0.5 + n / 10}
    assert doc.stats["ocr_pages"] == 3 and doc.stats["ocr_confidence"] == 0.7

    def failing(image: Any, languages: str, dpi: int, **kwargs: Any) -> _ocr.OcrPage:
        with lock:
            started.append(0)
            n = len(started) - 3
        if n == 2:
            raise RuntimeError("tesseract crashed\nwith two lines")
        return _ocr.OcrPage([], [], None, 0)

    monkeypatch.setattr(_ocr, "ocr_image", failing)
    with pytest.raises(DataError) as err:  # one worker: the second call is page 2's
        parse(pdfs["blank"], ocr_workers=1, ocr_orientation=False)
    assert str(err.value) == (
        f"{pdfs['blank']} page 2: OCR failed (RuntimeError: tesseract crashed with two lines)"
    )


def test_ocr_off_skips_scanned_pages(
    pdfs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_ocr(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("OCR ran with ocr=off")

    monkeypatch.setattr(_ocr, "ocr_image", no_ocr)
    doc = parse(pdfs["scanned"], ocr="off")
    assert doc.stats["ocr_skipped_pages"] == 1 and doc.stats["ocr_pages"] == 0
    assert "ocr_confidence" not in doc.stats
    assert paragraphs(doc) == [
        "Page one has a text layer.",
        F.SPACED_CHINESE,  # letter-spaced CJK: no spaces inferred from the gaps
        "Page three has a text layer too.",
    ]
    with pytest.raises(DataError) as err:
        parse(pdfs["image_only"], ocr="off")
    msg = str(err.value)
    assert msg == (
        f"{pdfs['image_only']}: no text layer on any of its 1 pages and parser.ocr=off "
        "(install Tesseract and use ocr=auto)"
    )


def test_tesseract_missing_is_a_one_line_config_error(
    pdfs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytesseract

    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "/nonexistent/tesseract")
    with pytest.raises(ConfigError) as err:
        parse(pdfs["scanned"])
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{pdfs['scanned']} page 2 has no text layer and needs OCR, but ")
    assert "apt-get install tesseract-ocr tesseract-ocr-chi-sim tesseract-ocr-eng" in msg
    assert "parser.ocr=off" in msg

    # Tesseract vanishing after the check (pytesseract's TesseractNotFoundError) reads the same
    def not_found(*args: Any, **kwargs: Any) -> Any:
        raise pytesseract.TesseractNotFoundError()

    monkeypatch.setattr(_ocr, "check_tesseract", lambda languages: None)
    monkeypatch.setattr(pytesseract, "image_to_data", not_found)
    with pytest.raises(ConfigError, match=r"page 1 has no text layer .* tesseract-ocr-chi-sim"):
        parse(pdfs["image_only"])


@needs_tesseract
def test_missing_language_pack_names_the_package(
    pdfs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytesseract

    monkeypatch.setattr(pytesseract, "get_languages", lambda config="": ["eng", "osd"])
    with pytest.raises(ConfigError) as err:
        parse(pdfs["image_only"])
    msg = str(err.value)
    assert "\n" not in msg
    assert "needs OCR in chi_sim" in msg and "apt-get install tesseract-ocr-chi-sim" in msg
    assert "parser.ocr_languages to installed ones (eng)" in msg


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("truncated", "not a readable PDF"),
        ("random", "not a readable PDF"),
        ("empty", "not a readable PDF"),
        ("encrypted", "encrypted PDF (needs a password)"),
        ("zero", "PDF has no pages"),
    ],
)
def test_bad_input_is_a_one_line_data_error(pdfs: dict[str, Path], name: str, message: str) -> None:
    with pytest.raises(DataError) as err:
        parse(pdfs[name])
    msg = str(err.value)
    assert msg.startswith(f"{pdfs[name]}: ") and message in msg
    assert "\n" not in msg


def test_encrypted_with_an_empty_user_password_opens(pdfs: dict[str, Path]) -> None:
    assert paragraphs(parse(pdfs["open_encrypted"])) == ["Secret service data."]


def test_a_failing_page_is_named(pdfs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Any, page: Any, number: int, chars: Any) -> Any:
        if number == 2:
            raise KeyError("fontname")
        return real(self, page, number, chars)

    real = PdfParser._text_page
    monkeypatch.setattr(PdfParser, "_text_page", broken)
    with pytest.raises(DataError) as err:
        parse(pdfs["manual"])
    assert str(err.value).startswith(f"{pdfs['manual']} page 2: cannot read the page (KeyError")


def test_options_are_checked() -> None:
    for bad in (
        {"ocr": "always"},
        {"ocr_languages": "eng chi_sim"},
        {"ocr_dpi": 10},
        {"ocr_layout_dpi": 10},
        {"ocr_reread_dpi": 5000},
        {"ocr_cell_dpi": 71},
        {"header_footer_margin": 0.7},
        {"header_footer_min_fraction": 0},
        {"tables": "yes"},
    ):
        with pytest.raises(OptionError):
            PdfParser(**bad)


# ---------------------------------------------------------------- speed


def test_text_layer_parse_speed(pdfs: dict[str, Path]) -> None:
    parse(pdfs["long"])  # warm imports and caches
    start = time.perf_counter()
    doc = parse(pdfs["long"])
    per_page = (time.perf_counter() - start) / doc.stats["pages"]
    print(f"text-layer parse: {per_page:.4f} s/page over {doc.stats['pages']} pages")
    assert doc.stats["pages"] == 20 and doc.stats["tables"] == 20
    assert per_page <= 0.5  # target 0.15 s/page; loose for a shared machine
