"""PDF files → one document each (pdfplumber for the text layer, Tesseract for scanned pages).

Text comes from each page's characters (``page.chars``, no repeated layout analysis): characters
are clustered into lines by vertical overlap (a subscript or superscript stays on its line),
lines into paragraphs by vertical gaps; ruled tables become Markdown tables, running headers and
footers are taken out of the body, and lines set clearly larger or bold become headings. Pages
without a text layer, or with one that is not text (``rag_lab.parser._layer_quality``), are
rendered and read by Tesseract (``rag_lab.parser._ocr``), turned upright first when they lie on
their side; so are images with no text over them on text-layer pages. The blocks go through
``DocumentBuilder``, so every section knows its page (and ``ocr`` / ``confidence``).
"""

from __future__ import annotations

import bisect
import datetime as dt
import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_lab.errors import ConfigError, DataError, RagLabError
from rag_lab.parser import _layer_quality, _ocr
from rag_lab.parser._builder import DocumentBuilder, Rows, fill_merged
from rag_lab.parser._pdf_layout import OCR, SKIPPED, TEXT, Line, Page, PdfLayout, Table
from rag_lab.parser.base import relative_id
from rag_lab.types import Document
from rag_lab.validate import OptionError, boolean, choice, integer, number

__all__ = ["OCR_MODES", "PdfParser"]

log = logging.getLogger(__name__)

OCR_MODES = ("auto", "off")

_BOLD = re.compile(r"bold|heavy|black|semibold|demi", re.I)
_SUBSET = re.compile(r"^[A-Z]{6}\+")
_CONTROL = re.compile(r"^[\x00-\x1f\x7f-\x9f]+$")
_LIGATURES = str.maketrans(
    {"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"}
)
# a page whose glyphs are mostly "(cid:N)" has no usable text layer (a font without a ToUnicode
# map); it is OCR'd like a scan
_CID = "(cid:"
# a scanned page is rendered at most this large (an A0 drawing at 300 dpi would be 140 Mpixel)
_MAX_PIXELS = 40_000_000
_PDF_DATE = re.compile(
    r"^D:(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?(?:([Zz])|([+\-])(\d{2})'?(\d{2})?'?)?"
)
# document-info keys read into fixed metadata names; Creator/Producer/Trapped say nothing useful
_INFO_STANDARD = {
    "Author": "author",
    "Subject": "subject",
    "Keywords": "keywords",
    "CreationDate": "creation_date",
    "ModDate": "mod_date",
}
_INFO_IGNORED = {"Title", "Creator", "Producer", "Trapped"}
_INFO_IGNORED_PREFIXES = ("PTEX.",)  # pdfTeX's banner
# values PDF writers put in when the user gave none (reportlab: "untitled", "anonymous", ...)
_PLACEHOLDERS = {"", "null", "none", "untitled", "anonymous", "unspecified", "unknown"}
_MISSING = {"", "null"}

# an image on a text-layer page is read by OCR from this size (points: 1 x 0.4 in), and kept when
# OCR reads it with at least this mean word confidence (a photo or a logo reads as a few weak
# "words")
_MIN_IMAGE_W, _MIN_IMAGE_H = 72.0, 28.8
_MIN_IMAGE_CONFIDENCE = 0.5


def _page_text(page: Page) -> str:
    """A read page's text as the layer check judges it: its lines and table cells."""
    cells = (c for t in page.tables for row in t.rows for c in row if c)
    return "\n".join([*(ln.text for ln in page.lines), *cells])


def _overlap(a: Sequence[float], b: Sequence[float]) -> float:
    """The share of the smaller of two boxes ``(x0, top, x1, bottom)`` the other covers."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return w * h / max(smaller, 1e-6)


def _one_line(problem: object) -> str:
    return " ".join(str(problem).split())


def _reason(exc: BaseException) -> str:
    """An exception as a short single line: ``KeyError: 'fontname'``."""
    text = _one_line(f"{type(exc).__name__}: {exc}").rstrip(": ")
    return text if len(text) <= 200 else text[:197] + "..."


@dataclass
class _Region:
    """An image on a text-layer page with no text over it (a scanned table pasted into a digital
    manual), rendered for Tesseract; its box in PDF points."""

    x0: float
    top: float
    x1: float
    bottom: float
    image: Any
    dpi: int


@dataclass
class _Render:
    """A page for Tesseract: a scanned page rendered whole (``image``), or a text-layer page
    (``layer``) with image ``regions`` to read (``image`` is ``None``). A whole page with a
    ``layer`` is a page whose text layer was judged unreadable: kept if OCR reads worse."""

    number: int
    width: float
    height: float
    image: Any
    dpi: int
    layer: Page | None = None
    regions: list[_Region] = field(default_factory=list)


# ---------------------------------------------------------------- characters → lines


def _is_bold(fontname: str) -> bool:
    return _BOLD.search(fontname) is not None


def _cluster(chars: Iterable[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Characters grouped into lines, each sorted left to right, lines top to bottom.

    Characters sharing a top and bottom form a run; runs are placed largest first, each joining
    the line it overlaps vertically by at least 35% of the smaller height (else starting a new
    line). Full-size text therefore sets the lines, and a subscript (smaller, lowered by up to
    about half its height) joins the line it belongs to instead of starting one of its own.
    Rotated characters are left out (a vertical watermark would shred the lines).
    """
    runs: dict[tuple[float, float], list[Mapping[str, Any]]] = {}
    for c in chars:
        if c.get("upright", True):
            runs.setdefault((round(c["top"], 1), round(c["bottom"], 1)), []).append(c)
    order = sorted(runs.items(), key=lambda kv: (kv[0][0] - kv[0][1], kv[0][0]))
    lines: list[tuple[float, float, list[Mapping[str, Any]]]] = []
    for (top, bottom), run in order:
        height = max(bottom - top, 0.1)
        best, best_ratio = -1, 0.35
        for i, (ltop, lbottom, _) in enumerate(lines):
            overlap = min(bottom, lbottom) - max(top, ltop)
            ratio = overlap / min(height, max(lbottom - ltop, 0.1))
            if ratio >= best_ratio:
                best, best_ratio = i, ratio
        if best < 0:
            lines.append((top, bottom, list(run)))
        else:
            lines[best][2].extend(run)
    lines.sort(key=lambda ln: (ln[0], min(c["x0"] for c in ln[2])))
    return [sorted(ln[2], key=lambda c: c["x0"]) for ln in lines]


def _line_text(chars: Sequence[Mapping[str, Any]]) -> str:
    """The text of one line: a space where the PDF has a space character or the gap between two
    glyphs is wider than 0.2 of the font size, never an inferred space between two CJK
    characters; an overprinted duplicate glyph (fake bold) is dropped, Latin ligatures (``ﬁ``)
    are spelt out, control characters and soft hyphens inside the line dropped (a soft hyphen
    ending the line stays: ``join_lines`` joins the word)."""
    out: list[str] = []
    prev: Mapping[str, Any] | None = None
    space = False
    last = len(chars) - 1
    for k, c in enumerate(chars):
        t = c["text"]
        if not t or t.isspace():
            space = prev is not None
            continue
        if _CONTROL.match(t) or (t == "\xad" and k < last):
            continue
        if prev is not None:
            if (
                t == prev["text"]
                and abs(c["x0"] - prev["x0"]) < 1
                and abs(c["top"] - prev["top"]) < 1
            ):
                continue
            gap = c["x0"] - prev["x1"]
            wide = gap > 0.2 * max(c["size"], prev["size"])
            cjk = _ocr.no_space_char(prev["text"][-1]) and _ocr.no_space_char(t[0])
            if space or (wide and not cjk):
                out.append(" ")
        out.append(t.translate(_LIGATURES))
        prev, space = c, False
    return "".join(out)


def _make_line(chars: Sequence[Mapping[str, Any]]) -> Line | None:
    glyphs = [c for c in chars if c["text"].strip()]
    if not glyphs:
        return None
    sizes = sorted(float(c["size"]) for c in glyphs)
    fonts = Counter(_SUBSET.sub("", str(c.get("fontname", ""))) for c in glyphs)
    # the line's box is that of its full-size glyphs (a subscript's box hangs below it)
    size = sizes[len(sizes) // 2]
    main = [c for c in glyphs if c["size"] >= 0.9 * size] or glyphs
    return Line(
        text=_line_text(chars),
        top=min(c["top"] for c in main),
        bottom=max(c["bottom"] for c in main),
        x0=min(c["x0"] for c in glyphs),
        x1=max(c["x1"] for c in glyphs),
        size=size,
        bold=all(_is_bold(str(c.get("fontname", ""))) for c in glyphs),
        font=fonts.most_common(1)[0][0],
    )


def _chars_text(chars: Sequence[Mapping[str, Any]]) -> str:
    """Text of a table cell: its lines joined like a paragraph's."""
    lines = [_make_line(ln) for ln in _cluster(chars)]
    return _ocr.join_lines([ln.text for ln in lines if ln is not None])


# ---------------------------------------------------------------- tables (text layer)

_TABLE_SETTINGS = {
    "vertical_strategy": "lines",
    "horizontal_strategy": "lines",
    "snap_tolerance": 3,
    "join_tolerance": 3,
    "intersection_tolerance": 3,
}


def _inside(c: Mapping[str, Any], box: Sequence[float], pad: float = 0.5) -> bool:
    x = (c["x0"] + c["x1"]) / 2
    y = (c["top"] + c["bottom"]) / 2
    return box[0] - pad <= x <= box[2] + pad and box[1] - pad <= y <= box[3] + pad


def _table_rows(
    table: Any, chars: Sequence[Mapping[str, Any]]
) -> tuple[list[list[str]], tuple[float, ...]]:
    """Cell texts of a pdfplumber table and its column edges. The texts come from our own line
    building (so a CJK cell gets no spaces); a grid unit that a merged cell covers (pdfplumber:
    ``None``) takes the text of the cell whose box covers it, to its left or above."""
    # pdfplumber aligns every row's cells with the sorted x0 of all cells, rows start at a top
    rows = [list(r.cells) for r in table.rows]
    cells = [c for r in rows for c in r if c is not None]
    xs = sorted({c[0] for c in cells})
    tops = [min(c[1] for c in r if c is not None) for r in rows]
    units: list[list[tuple[float, ...] | None]] = []
    for i, r in enumerate(rows):
        unit_row: list[tuple[float, ...] | None] = []
        for j in range(len(xs)):
            cell = r[j] if j < len(r) else None
            if cell is None:
                x, y = xs[j] + 1, tops[i] + 1
                cell = next((b for b in cells if b[0] <= x <= b[2] and b[1] <= y <= b[3]), None)
            unit_row.append(tuple(cell) if cell is not None else None)
        units.append(unit_row)
    members: dict[tuple[float, ...], list[Mapping[str, Any]]] = {tuple(c): [] for c in cells}
    for ch in chars:  # bisect into the grid: a page-size table has thousands of characters
        x, y = (ch["x0"] + ch["x1"]) / 2, (ch["top"] + ch["bottom"]) / 2
        i, j = bisect.bisect_right(tops, y) - 1, bisect.bisect_right(xs, x) - 1
        if i >= 0 and j >= 0:
            box = units[i][j]
            if box is not None and box[0] <= x <= box[2] and box[1] <= y <= box[3]:
                members[box].append(ch)
    text = {box: _chars_text(cs) for box, cs in members.items()}
    out: Rows = [[text[u] if u is not None else None for u in row] for row in units]
    return fill_merged(out), (*xs, max(c[2] for c in cells))


# ---------------------------------------------------------------- metadata


def _info_value(value: Any) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.decode("latin-1")
    name = getattr(value, "name", None)  # pdfminer PSLiteral: /Name
    if isinstance(name, (str, bytes)):
        return _info_value(name)
    if isinstance(value, (list, tuple)):
        return ", ".join(_info_value(v) for v in value)
    return str(value)


def _iso_date(value: str) -> str:
    """A PDF date (``D:20240115093000+08'00'``) as ISO 8601; other strings unchanged."""
    m = _PDF_DATE.match(value.strip())
    if not m:
        return value
    year, month, day, hour, minute, second, z, sign, tzh, tzm = m.groups()
    try:
        date = dt.date(int(year), int(month or 1), int(day or 1))
        if hour is None:
            return date.isoformat()
        tz = None
        if z:
            tz = dt.timezone.utc
        elif sign:
            delta = dt.timedelta(hours=int(tzh), minutes=int(tzm or 0))
            tz = dt.timezone(delta if sign == "+" else -delta)
        stamp = dt.datetime(
            date.year,
            date.month,
            date.day,
            int(hour),
            int(minute or 0),
            int(second or 0),
            tzinfo=tz,
        )
    except ValueError:
        return value
    return stamp.isoformat()


def _info_metadata(info: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """``(title, metadata)`` from the document-info dictionary: the standard fields under
    snake_case names (placeholders such as reportlab's ``anonymous`` left out), every custom key
    as a string (a leading ``/`` dropped), dates in ISO 8601; ``""`` and ``null`` values left
    out."""
    title = ""
    meta: dict[str, str] = {}
    for raw_key, raw in info.items():
        key = str(raw_key).lstrip("/")
        value = " ".join(_info_value(raw).split())
        placeholder = value.strip("()").lower() in _PLACEHOLDERS
        if key == "Title":
            title = "" if placeholder else value
        elif key in _INFO_STANDARD:
            if not placeholder:
                meta[_INFO_STANDARD[key]] = _iso_date(value)
        elif (
            key
            and key not in _INFO_IGNORED
            and not key.startswith(_INFO_IGNORED_PREFIXES)
            and value.lower() not in _MISSING
        ):
            meta[key] = _iso_date(value)
    return title, meta


# ---------------------------------------------------------------- the parser


class PdfParser:
    """One document per PDF: the text layer in reading order, ruled tables as Markdown tables,
    headings as the section path, running headers/footers taken out of the body, OCR of pages
    that have no text layer.

    Args:
        ocr: ``auto`` reads pages without a text layer with Tesseract (and those whose layer is
            unreadable, and images on text pages: below); ``off`` skips them (counted in
            ``stats["ocr_skipped_pages"]``; a PDF with no text layer at all is a ``DataError``).
            Counted as without a text layer: a page whose glyphs are mostly unmapped
            (``(cid:N)``: a font without a Unicode map) and one whose only text is a stamp
            (under 16 characters) over a full-page image.
        ocr_languages: Tesseract languages joined by ``+`` (``chi_sim+eng``); each must be
            installed (``tesseract --list-langs``), else ``ConfigError`` naming the package.
            The first one reads every line and cell; the others re-read weak ones (see
            ``rag_lab.parser._ocr``): put the page's main language first.
        ocr_dpi: resolution at which a scanned page is rendered for Tesseract (ruled tables are
            found and their cells read at this resolution).
        ocr_layout_dpi: resolution the page (tables whitened) is shrunk to for Tesseract's
            page-text pass (one column, ``--psm 4``; ``null``: ``ocr_dpi``): less CPU for the
            same body text; 120 garbled 9.5 pt text, 180-200 read it no better.
        ocr_cell_dpi: resolution table cells are shrunk to for their first reading (``null``:
            ``ocr_dpi``): ``chi_sim`` reads 10 pt cells better at 150-180 dpi than at 300.
        ocr_reread_dpi: resolution weak lines and cells (a low mean confidence or one weak
            word) are read again at (``null``: ``ocr_dpi``): cells in the first language, then
            lines and cells in the others.
        header_footer_margin: the top and bottom fraction of the page height where running
            headers and footers are looked for (0 turns their removal off).
        header_footer_min_fraction: a line in those margins is a running header/footer when its
            text, digits normalised (page numbers), recurs on at least this fraction of the
            pages (and on at least 2).
        heading_size_ratio: a line whose font size is at least this multiple of the body's
            median size is a heading candidate (as is an all-bold line in a non-bold body).
        max_heading_chars: longer lines are never headings.
        tables: detect ruled tables (``page.find_tables``; on scanned pages, rules in the
            image); ``false`` reads their cells as text lines.
        ocr_workers: scanned pages recognised at once (each by up to two single-threaded
            Tesseract processes at once, while the next pages are read).
        text_layer_min_readable: a text layer whose readable share (``_layer_quality``: the
            characters in words, numbers and codes rather than in random glyph runs, control
            characters or ``(cid:N)``) is below this is unreadable: the page is read by OCR
            (kept as it is when OCR reads worse, or with ``ocr=off``) and counted
            (``stats["garbled_layer_pages"]``). 0 turns the check off.
        ocr_images: images on a text-layer page with no text over them (a scanned table pasted
            into a digital manual; at least 1 x 0.4 in) are read by OCR too, their lines and
            ruled tables placed where the image is (``stats["ocr_images"]``).
        ocr_orientation: before OCR, each scanned page and image is turned upright when
            Tesseract's orientation detection (the ``osd`` data, ``tesseract-ocr-osd``) says it
            lies on its side or upside down (``stats["rotated_ocr"]``); without the data it is
            read as it is, with a warning.
        ocr_min_table_confidence: an OCR'd ruled table whose mean cell confidence is below this
            is not made a table (junk read from a table the detector cannot turn): its rows are
            kept as text lines and counted (``stats["weak_ocr_tables"]``).

    What a document holds:

    - ``doc_id``: the document-info key ``doc_id`` when present, else the path relative to the
      corpus root without suffix; ``title``: the info ``Title``, else the first running header,
      else the first level-1 heading, else the file stem.
    - ``metadata``: ``author``, ``subject``, ``keywords``, ``creation_date``, ``mod_date`` (ISO
      8601) from the document info, plus every custom info key as a string (``version``,
      ``valid_from``, ``valid_to``, ``source_type``, ``doc_type``, ``language``, ...; values
      ``""`` and ``null`` left out); ``page_header`` / ``page_footer`` (lists of the running
      lines, page numbers stripped); ``source`` (the relative path with suffix).
    - ``text``: Markdown. The running headers and footers once, first (section ``kind:
      page_header``), then every page's headings (``#``), paragraphs and tables (a caption line
      above a table, ``Table 2 ...`` / ``表 2 ...`` or a short bold line, becomes the table's
      caption). A table continued on the next page is one table (``pages: [n, n + 1]``): when
      the next page starts with a table repeating its header row (dropped), or with a table of
      the same columns and no caption. Section metadata: ``page``; ``ocr: true`` and
      ``confidence`` (mean Tesseract word confidence, 0-1) on OCR'd pages; ``kind: table``,
      ``caption``, ``pages`` on tables.
    - ``stats``: ``pages``, ``text_layer_pages``, ``ocr_pages``, ``ocr_skipped_pages``,
      ``ocr_page_numbers``, ``skipped_page_numbers``, ``tables``, ``sections``,
      ``garbled_layer_pages`` / ``garbled_layer_page_numbers``, ``ocr_images``,
      ``rotated_ocr``, ``weak_ocr_tables``, and ``ocr_confidence`` (mean over OCR'd pages) when
      any.

    Headings: a line that is short, not a caption, and set at ``heading_size_ratio`` x the body
    size or larger, or all bold (in a body that is not), or numbered and at least 1.08x the
    body size, or in another font and at least 1.05x.
    Levels: a numbered heading (``3.2 检查步骤``) is 1 + its number of parts (level 3), so the
    document title (the largest unnumbered heading) is level 1; an unnumbered heading takes the
    usual level of numbered headings of its size, else its size rank among heading sizes. On
    OCR'd pages a one-line paragraph at 1.3x the page's median text height is a heading (numbered:
    as above, else level 2).

    Custom info keys are the mechanism for ``doc_id``, ``version``, ``valid_from``, ``valid_to``,
    ``source_type`` and other metadata: PDF libraries write them (pypdf's
    ``writer.add_metadata({"/doc_id": ...})``, pikepdf's ``pdf.docinfo["/doc_id"] = ...``);
    reportlab has no public API for them (see ``tests/parser/pdf_fixtures.py::set_info_keys``).

    Bad input (a truncated or corrupt file, an encrypted PDF that needs a password, a PDF with
    no pages, a page that cannot be read) raises ``DataError`` naming the file (and page); a
    missing Tesseract or language pack raises ``ConfigError`` naming the package to install.
    Limits: one text column is assumed (two columns side by side are read line by line across);
    unruled tables are read as text; rotated text is left out.
    """

    suffixes = (".pdf",)

    def __init__(
        self,
        ocr: str = "auto",
        ocr_languages: str = "chi_sim+eng",
        ocr_dpi: int = 300,
        header_footer_margin: float = 0.1,
        header_footer_min_fraction: float = 0.5,
        heading_size_ratio: float = 1.15,
        max_heading_chars: int = 80,
        tables: bool = True,
        ocr_workers: int = 2,
        ocr_layout_dpi: int | None = 150,
        ocr_reread_dpi: int | None = None,
        ocr_cell_dpi: int | None = 180,
        text_layer_min_readable: float = 0.5,
        ocr_images: bool = True,
        ocr_orientation: bool = True,
        ocr_min_table_confidence: float = 0.6,
    ) -> None:
        self.ocr = choice(ocr, "ocr", OCR_MODES)
        if not isinstance(ocr_languages, str) or not re.fullmatch(
            r"[A-Za-z0-9_]+(?:\+[A-Za-z0-9_]+)*", ocr_languages
        ):
            raise OptionError(
                "ocr_languages", ocr_languages, "must be Tesseract languages joined by +"
            )
        self.ocr_languages = ocr_languages
        self.ocr_dpi = integer(ocr_dpi, "ocr_dpi", ge=72, le=1200)
        self.header_footer_margin = number(
            header_footer_margin, "header_footer_margin", ge=0, le=0.5
        )
        self.header_footer_min_fraction = number(
            header_footer_min_fraction, "header_footer_min_fraction", gt=0, le=1
        )
        self.heading_size_ratio = number(heading_size_ratio, "heading_size_ratio", ge=1)
        self.max_heading_chars = integer(max_heading_chars, "max_heading_chars", ge=1)
        self.tables = boolean(tables, "tables")
        self.ocr_workers = integer(ocr_workers, "ocr_workers", ge=1, le=64)
        self.ocr_layout_dpi = (
            None
            if ocr_layout_dpi is None
            else integer(ocr_layout_dpi, "ocr_layout_dpi", ge=72, le=1200)
        )
        self.ocr_reread_dpi = (
            None
            if ocr_reread_dpi is None
            else integer(ocr_reread_dpi, "ocr_reread_dpi", ge=72, le=1200)
        )
        self.ocr_cell_dpi = (
            None if ocr_cell_dpi is None else integer(ocr_cell_dpi, "ocr_cell_dpi", ge=72, le=1200)
        )
        self.text_layer_min_readable = number(
            text_layer_min_readable, "text_layer_min_readable", ge=0, le=1
        )
        self.ocr_images = boolean(ocr_images, "ocr_images")
        self.ocr_orientation = boolean(ocr_orientation, "ocr_orientation")
        self.ocr_min_table_confidence = number(
            ocr_min_table_confidence, "ocr_min_table_confidence", ge=0, le=1
        )
        self._layout = PdfLayout(
            self.header_footer_margin,
            self.header_footer_min_fraction,
            self.heading_size_ratio,
            self.max_heading_chars,
        )
        self._tesseract_ok = False
        self._osd: bool | None = None  # whether the osd data is installed (checked once)
        self._ocr_warned = False  # the warning that optional OCR is unavailable, given once

    # ------------------------------------------------------------ reading

    def parse(self, path: Path, root: Path) -> Iterator[Document]:
        yield self._parse(Path(path), root)

    def _open(self, path: Path) -> Any:
        import logging

        import pdfplumber
        from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect

        # pdfminer logs a WARNING for every font it cannot measure and every object it repairs
        # (hundreds for one damaged file); what matters reaches the user as a DataError
        if logging.getLogger("pdfminer").level == logging.NOTSET:
            logging.getLogger("pdfminer").setLevel(logging.ERROR)

        try:
            return pdfplumber.open(path, raise_unicode_errors=False)
        except FileNotFoundError:
            raise DataError(f"{path}: file not found") from None
        except Exception as exc:  # pdfminer raises many types for broken files
            inner = exc.args[0] if exc.args and isinstance(exc.args[0], Exception) else exc
            if isinstance(inner, PDFPasswordIncorrect):
                raise DataError(f"{path}: encrypted PDF (needs a password)") from None
            if isinstance(inner, PDFEncryptionError):
                raise DataError(f"{path}: encrypted PDF ({_one_line(inner)})") from None
            raise DataError(f"{path}: not a readable PDF ({_reason(inner)})") from None

    def _parse(self, path: Path, root: Path) -> Document:
        pdf = self._open(path)
        try:
            try:
                info = dict(pdf.metadata or {})
                pdf_pages = list(pdf.pages)
            except RagLabError:
                raise
            except Exception as exc:
                raise DataError(f"{path}: not a readable PDF ({_reason(exc)})") from None
            if not pdf_pages:
                raise DataError(f"{path}: PDF has no pages")
            pages = self._read_pages(pdf_pages, path)
        finally:
            try:
                pdf.close()
            except Exception:  # noqa: BLE001 - closing walks the page tree, which may be broken:
                pass  # the error that matters (a DataError above) must not be replaced
        if all(p.kind == SKIPPED for p in pages):
            raise DataError(
                f"{path}: no text layer on any of its {len(pages)} pages and parser.ocr=off "
                "(install Tesseract and use ocr=auto)"
            )
        return self._document(path, root, info, pages)

    def _read_pages(self, pdf_pages: Sequence[Any], path: Path) -> list[Page]:
        """Every page, in order. Scanned pages are rendered here and recognised by up to
        ``ocr_workers`` Tesseract processes at once while the next pages are read; at most that
        many rendered images wait in memory."""
        from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

        from rag_lab.runtime import progress

        pages: list[Page | None] = []
        seen_images: set[Any] = set()  # image objects met on earlier pages (logos repeat)
        running: list[tuple[int, Future[Page]]] = []
        pool: ThreadPoolExecutor | None = None
        shown = progress.bar(total=len(pdf_pages), desc=f"read {path.name}", unit="page")

        def collect(block: bool) -> None:
            if block:
                wait([f for _, f in running], return_when=FIRST_COMPLETED)
            for item in [it for it in running if it[1].done()]:
                running.remove(item)
                pages[item[0]] = self._page_result(item[1], path, item[0] + 1)
                shown.update()

        try:
            for i, page in enumerate(pdf_pages, start=1):
                try:
                    got = self._read_page(page, i, path, seen_images)
                except RagLabError:
                    raise
                except Exception as exc:
                    raise DataError(
                        f"{path} page {i}: cannot read the page ({_reason(exc)})"
                    ) from None
                finally:
                    page.close()  # pdfplumber caches every page's objects otherwise
                if isinstance(got, Page):
                    pages.append(got)
                    shown.update()
                    continue
                if pool is None:
                    pool = ThreadPoolExecutor(self.ocr_workers, thread_name_prefix="rag-lab-ocr")
                running.append((len(pages), pool.submit(self._recognise, got, path)))
                pages.append(None)
                collect(block=False)  # an OCR failure stops the parse early
                while len(running) > self.ocr_workers:
                    collect(block=True)
            while running:
                collect(block=True)
        finally:
            shown.close()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        return [p for p in pages if p is not None]

    @staticmethod
    def _page_result(future: Any, path: Path, number: int) -> Page:
        try:
            page: Page = future.result()
        except RagLabError:
            raise
        except Exception as exc:
            raise DataError(f"{path} page {number}: OCR failed ({_reason(exc)})") from None
        return page

    def _read_page(
        self, page: Any, number: int, path: Path, seen_images: set[Any] | None = None
    ) -> Page | _Render:
        """A text-layer page read; a skipped page; or a page rendered for OCR: a scanned page,
        a page whose text layer is unreadable, or a text-layer page with images to read."""
        width, height = float(page.width), float(page.height)
        chars = page.chars
        glyphs = [c for c in chars if c["text"].strip()]
        unmapped = sum(1 for c in glyphs if c["text"].startswith(_CID))
        if (
            glyphs
            and unmapped <= len(glyphs) / 2
            and not (len(glyphs) < 16 and self._image_covered(page))
        ):
            if unmapped:
                chars = [c for c in chars if not c["text"].startswith(_CID)]
            out = self._text_page(page, number, chars)
            out.readable = _layer_quality.readable_share(_page_text(out))
            if out.readable is not None and out.readable < self.text_layer_min_readable:
                out.garbled = True
                if self.ocr == "off" or not self._can_ocr(path, number):
                    return out
                job = self._render(page, number, path)
                job.layer = out
                return job
            if self.ocr != "off" and self.ocr_images:
                regions = self._image_regions(page, chars, number, path, seen_images)
                if regions:
                    return _Render(number, width, height, None, 0, out, regions)
            return out
        if self.ocr == "off":
            return Page(number, width, height, SKIPPED)
        return self._render(page, number, path)

    def _image_regions(
        self,
        page: Any,
        chars: Sequence[Mapping[str, Any]],
        number: int,
        path: Path,
        seen: set[Any] | None = None,
    ) -> list[_Region]:
        """The images of a text-layer page that no character lies on (at least 1 x 0.4 in),
        each rendered at ``ocr_dpi`` (the page's text and drawings over it included). Left
        out: images inside the running header/footer margins, and an image object already met
        on an earlier page of the file (``seen``): a logo or a watermark, not a pasted scan."""
        width, height = float(page.width), float(page.height)
        margin = self.header_footer_margin * height
        boxes: list[tuple[float, float, float, float]] = []
        for im in page.images:
            x0, top = max(0.0, float(im["x0"])), max(0.0, float(im["top"]))
            x1, bottom = min(width, float(im["x1"])), min(height, float(im["bottom"]))
            if x1 - x0 < _MIN_IMAGE_W or bottom - top < _MIN_IMAGE_H:
                continue
            if bottom <= margin or top >= height - margin:
                continue
            if seen is not None:
                key = getattr(im.get("stream"), "objid", None)  # pdfminer's PDFStream
                if key is not None:
                    if key in seen:
                        continue
                    seen.add(key)
            box = (x0, top, x1, bottom)
            if sum(1 for c in chars if c["text"].strip() and _inside(c, box)) > 2:
                continue  # text over the image: a searchable scan, or a figure with labels
            if any(_overlap(box, b) > 0.5 for b in boxes):
                continue  # the same picture twice (an image and its mask)
            boxes.append(box)
        if not boxes or not self._can_ocr(path, number):
            return []
        regions = []
        for box in boxes:
            area_in2 = (box[2] - box[0]) * (box[3] - box[1]) / 72**2
            dpi = min(self.ocr_dpi, int(math.sqrt(_MAX_PIXELS / max(area_in2, 1e-6))))
            image = page.crop(box).to_image(resolution=dpi).original
            regions.append(_Region(*box, image, dpi))
        return regions

    @staticmethod
    def _image_covered(page: Any) -> bool:
        area = sum(
            max(0.0, float(im["x1"]) - float(im["x0"])) * max(0.0, float(im["bottom"]) - im["top"])
            for im in page.images
        )
        return area >= 0.5 * float(page.width) * float(page.height)

    def _text_page(self, page: Any, number: int, chars: Sequence[Mapping[str, Any]]) -> Page:
        out = Page(number, float(page.width), float(page.height), TEXT)
        boxes: list[tuple[float, ...]] = []
        if self.tables and (page.rects or page.lines or page.curves):
            for t in page.find_tables(_TABLE_SETTINGS):
                n_rows, n_cols = len(t.rows), max(len(r.cells) for r in t.rows)
                if n_rows < 2 or n_cols < 2:
                    continue  # a framed note or a rule pair, not a table
                inside = [c for c in chars if _inside(c, t.bbox)]
                rows, x_edges = _table_rows(t, inside)
                if not any(any(c.strip() for c in r) for r in rows):
                    continue
                boxes.append(tuple(t.bbox))
                out.tables.append(
                    Table(rows, float(t.bbox[1]), float(t.bbox[3]), x_edges, [number])
                )
        body = [c for c in chars if not any(_inside(c, b) for b in boxes)] if boxes else chars
        for ln in _cluster(body):
            line = _make_line(ln)
            if line is not None and line.text.strip():
                out.lines.append(line)
        return out

    def _render(self, page: Any, number: int, path: Path) -> _Render:
        self._check_tesseract(path, number)
        area_in2 = float(page.width) * float(page.height) / 72**2
        dpi = min(self.ocr_dpi, int(math.sqrt(_MAX_PIXELS / max(area_in2, 1e-6))))
        image = page.to_image(resolution=dpi).original
        return _Render(number, float(page.width), float(page.height), image, dpi)

    def _recognise(self, job: _Render, path: Path) -> Page:
        """Tesseract's reading of a rendered page, or of the images of a text-layer page (runs
        in a worker thread)."""
        number = job.number
        try:
            if job.image is None and job.layer is not None:
                return self._read_regions(job.layer, job.regions)
            return self._read_scan(job)
        except _ocr.TesseractMissing:
            raise self._missing_tesseract(path, number) from None
        except RagLabError:
            raise
        except Exception as exc:
            text = str(exc)
            if "Failed loading language" in text or "load any languages" in text:
                self._tesseract_ok = False
                self._check_tesseract(path, number)
            raise DataError(f"{path} page {number}: OCR failed ({_reason(exc)})") from None

    def _read_image(self, image: Any, dpi: int) -> tuple[_ocr.OcrPage, int, tuple[int, int]]:
        """``(reading, degrees turned, (width, height) of the image read)``: ``image`` turned
        upright first when orientation detection is on and sure (``_ocr.orientation``)."""
        degrees = 0
        if self.ocr_orientation and self._has_osd():
            degrees, _ = _ocr.orientation(image, dpi)
            image = _ocr.upright(image, degrees)
        result = _ocr.ocr_image(
            image,
            self.ocr_languages,
            dpi,
            reread_dpi=self.ocr_reread_dpi,
            layout_dpi=self.ocr_layout_dpi,
            cell_dpi=self.ocr_cell_dpi,
        )
        return result, degrees, (image.width, image.height)

    def _read_scan(self, job: _Render) -> Page:
        result, degrees, (w_px, h_px) = self._read_image(job.image, job.dpi)
        width, height = (job.width, job.height)
        if degrees in (90, 270):  # the page is read in the turned frame
            width, height = height, width
        out = Page(job.number, width, height, OCR)
        out.confidence = result.confidence
        out.rotated = int(degrees != 0)
        for par in result.paragraphs:
            for k, ol in enumerate(par):
                out.lines.append(
                    Line(ol.text, ol.top, ol.bottom, ol.x0, ol.x1, ol.size, par_start=k == 0)
                )
        self._add_tables(out, result.tables, job.number)
        if job.layer is not None:  # the text layer was unreadable: OCR wins unless it reads worse
            layer = job.layer
            ocr_share = _layer_quality.readable_share(_page_text(out))
            if ocr_share is None and not out.lines and not out.tables:
                ocr_share = 0.0
            if ocr_share is not None and layer.readable is not None and ocr_share < layer.readable:
                return layer
            out.garbled = True
        return out

    def _read_regions(self, page: Page, regions: Sequence[_Region]) -> Page:
        """The lines and tables OCR reads in the images of a text-layer page, placed in the
        image's box (an image read turned keeps its reading order, squeezed into the box)."""
        for r in regions:
            result, degrees, (w_px, h_px) = self._read_image(r.image, r.dpi)
            if not result.n_words or (result.confidence or 0.0) < _MIN_IMAGE_CONFIDENCE:
                continue  # a photo, a logo, a drawing: no text worth keeping
            page.ocr_images += 1
            page.rotated += int(degrees != 0)
            # OCR positions (points in the image read) → the page: x from the box's left, y
            # scaled into the box (a turned image is taller or wider than its box)
            sx = (r.x1 - r.x0) / max(w_px * 72 / r.dpi, 1e-6)
            sy = (r.bottom - r.top) / max(h_px * 72 / r.dpi, 1e-6)

            def y(v: float, r: _Region = r, sy: float = sy) -> float:
                return r.top + v * sy

            def x(v: float, r: _Region = r, sx: float = sx) -> float:
                return r.x0 + v * sx

            for par in result.paragraphs:
                for k, ol in enumerate(par):
                    page.lines.append(
                        Line(
                            ol.text,
                            y(ol.top),
                            y(ol.bottom),
                            x(ol.x0),
                            x(ol.x1),
                            ol.size * sy,
                            par_start=k == 0,
                            ocr=True,
                        )
                    )
            tables = [
                _ocr.OcrTable(
                    t.rows, y(t.top), y(t.bottom), tuple(x(e) for e in t.x_edges), t.confidence
                )
                for t in result.tables
            ]
            self._add_tables(page, tables, page.number, ocr=True)
        page.lines.sort(key=lambda ln: (ln.top, ln.x0))
        return page

    def _add_tables(
        self, page: Page, tables: Sequence[_ocr.OcrTable], number: int, ocr: bool = False
    ) -> None:
        """OCR'd tables onto ``page``; one read too weakly (``ocr_min_table_confidence``) gives
        its rows as lines of text instead (one paragraph), counted."""
        for t in tables:
            if t.confidence is not None and t.confidence < self.ocr_min_table_confidence:
                page.weak_tables += 1
                step = (t.bottom - t.top) / max(len(t.rows), 1)
                for i, row in enumerate(t.rows):
                    text = " ".join(c for c in row if c)
                    if text:
                        top = t.top + i * step
                        x0, x1 = t.x_edges[0], t.x_edges[-1]
                        page.lines.append(
                            Line(text, top, top + step, x0, x1, step, par_start=i == 0, ocr=ocr)
                        )
                continue
            page.tables.append(Table(t.rows, t.top, t.bottom, t.x_edges, [number]))

    def _can_ocr(self, path: Path, number: int) -> bool:
        """Whether Tesseract can read a page whose OCR is an improvement, not a need (an
        unreadable text layer, images on a text page): without it such pages keep their layer,
        with one warning, where a scanned page stops the run (``_check_tesseract``)."""
        try:
            self._check_tesseract(path, number)
        except ConfigError as exc:
            if not self._ocr_warned:
                self._ocr_warned = True
                log.warning(
                    "%s page %d: not OCR'd (its text layer is unreadable, or it holds images), "
                    "and PDFs after it are read the same way: %s",
                    path,
                    number,
                    exc,
                )
            return False
        return True

    def _has_osd(self) -> bool:
        if self._osd is None:
            self._osd = _ocr.has_osd()
            if not self._osd:
                log.warning(
                    "Tesseract's orientation data (osd) is not installed: scanned pages and "
                    "images are read as they lie (apt-get install tesseract-ocr-osd, or "
                    "scripts/install_system_deps.sh)"
                )
        return self._osd

    def _missing_tesseract(self, path: Path, number: int) -> ConfigError:
        return ConfigError(
            f"{path} page {number} has no text layer and needs OCR, but Tesseract is not "
            "installed: apt-get install tesseract-ocr "
            + " ".join(_ocr.debian_package(lang) for lang in self.ocr_languages.split("+"))
            + " (or run scripts/install_system_deps.sh), or set parser.ocr=off to skip such pages"
        )

    def _check_tesseract(self, path: Path, number: int) -> None:
        if self._tesseract_ok:
            return
        try:
            _ocr.check_tesseract(self.ocr_languages)
        except _ocr.TesseractMissing:
            raise self._missing_tesseract(path, number) from None
        except _ocr.LanguageMissing as exc:
            packages = " ".join(_ocr.debian_package(lang) for lang in exc.missing)
            installed = "+".join(lang for lang in exc.installed if lang != "osd") or "none"
            raise ConfigError(
                f"{path} page {number} has no text layer and needs OCR in "
                f"{'+'.join(exc.missing)}, but Tesseract's language data for it is not "
                f"installed: apt-get install {packages} (or run scripts/install_system_deps.sh), "
                f"or set parser.ocr_languages to installed ones ({installed}) or parser.ocr=off "
                "to skip such pages"
            ) from None
        self._tesseract_ok = True

    # ------------------------------------------------------------ the document

    def _document(
        self, path: Path, root: Path, info: Mapping[str, Any], pages: list[Page]
    ) -> Document:
        title, meta = _info_metadata(info)
        headers, footers = self._layout.arrange(pages)

        b = DocumentBuilder()
        running = [*headers, *footers]
        if running:
            b.context(kind="page_header")
            b.paragraph(" · ".join(running))
            b.context(kind=None)
        first_h1 = ""
        for p in pages:
            if p.kind == SKIPPED:
                continue
            ocr = p.kind == OCR
            b.context(page=p.number, ocr=True if ocr else None, confidence=p.confidence)
            for block in p.blocks:
                if isinstance(block, Table):
                    b.table(block.rows, caption=block.caption, pages=list(block.pages))
                elif isinstance(block, Line):
                    b.heading(block.level, block.text)
                    if block.level == 1 and not first_h1:
                        first_h1 = block.text
                else:
                    b.paragraph(_ocr.join_lines([ln.text for ln in block]))

        doc_id = meta.pop("doc_id", "") or relative_id(path, root)
        if headers:
            meta["page_header"] = headers  # type: ignore[assignment]
        if footers:
            meta["page_footer"] = footers  # type: ignore[assignment]
        meta["source"] = relative_id(path, root) + path.suffix
        title = title or (headers[0] if headers else "") or first_h1 or path.stem
        n_ocr = sum(1 for p in pages if p.kind == OCR)
        stats: dict[str, Any] = {
            "pages": len(pages),
            "text_layer_pages": sum(1 for p in pages if p.kind == TEXT),
            "ocr_pages": n_ocr,
            "ocr_skipped_pages": sum(1 for p in pages if p.kind == SKIPPED),
            # which pages had no text layer (the ingest report lists them)
            "ocr_page_numbers": [p.number for p in pages if p.kind == OCR],
            "skipped_page_numbers": [p.number for p in pages if p.kind == SKIPPED],
        }
        garbled = [p.number for p in pages if p.garbled]
        stats.update(
            {
                # pages whose text layer was unreadable (OCR'd unless OCR is off or read worse)
                "garbled_layer_pages": len(garbled),
                "garbled_layer_page_numbers": garbled,
                "ocr_images": sum(p.ocr_images for p in pages),  # images read on text pages
                "rotated_ocr": sum(p.rotated for p in pages),  # pages and images turned upright
                "weak_ocr_tables": sum(p.weak_tables for p in pages),  # kept out of tables
            }
        )
        confs = [p.confidence for p in pages if p.kind == OCR and p.confidence is not None]
        if confs:
            stats["ocr_confidence"] = round(sum(confs) / len(confs), 4)
        return b.build(doc_id, title, meta, stats)
