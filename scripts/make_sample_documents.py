"""Render the real-format documents of the maintenance_kb sample from the texts in sample_sources/.

Teams feed rag_lab PDFs (some of them scanned), web pages, Word files and ticket exports, so the
sample corpus carries a few of each, generated from the project's own text:

- ``docs/manuals/hx200-manual-v1.pdf`` and ``-v2.pdf``: reportlab platypus, A4, WenQuanYi Micro
  Hei embedded, a running header and footer on every page, grid tables with captions (one of them
  crosses a page break and repeats its header row), the front matter as PDF info keys. The last
  page of v1 is a scanned page: a 300 dpi greyscale image with no text layer.
- ``docs/release_notes/hx200-controller-firmware-2-1.html``: a web page with navigation, a cookie
  banner, a sidebar and a footer around the article; the front matter as ``<meta>`` tags.
- ``docs/manuals/loto-safety-procedure.docx``: python-docx, the front matter as core properties.
- ``docs/tickets/ticket-export-2024.csv``: the SV7 tickets as an Excel-style CSV export.
- ``parsing_truth.json``: what was drawn where (page lines, headers/footers, table cells), the
  ground truth for measuring parsers.

The output is byte-for-byte reproducible: ``python scripts/make_sample_documents.py`` rewrites the
committed files unchanged. It needs the Debian fonts ``fonts-wqy-microhei`` and
``fonts-dejavu-core``; ``--ocr-check`` (needs tesseract with chi_sim) reports how well OCR reads
the scanned page back.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import functools
import html
import io
import json
import re
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCES = Path(__file__).resolve().parent / "sample_sources"
DATASET = ROOT / "rag_lab" / "sample" / "maintenance_kb"

CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")
FALLBACK_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
FONT = "WQYMicroHei"
FALLBACK = "DejaVuSans"
AUTHOR = "rag_lab sample"
SEED = 20210101
NOISE_SIGMA = 1.0  # grey noise on the scanned page (8-bit levels)
BLUR_RADIUS = 0.7  # px, softens the drawn edges like a scanner
CELL_PAD_MM = 2.0  # cell padding on the scanned page
CELL_PT = 10.0  # table text size on the scanned page

PDF_MANUALS = ("hx200-manual-v1", "hx200-manual-v2")
HTML_NOTES = ("hx200-controller-firmware-2-1",)
DOCX_MANUALS = ("loto-safety-procedure",)
TICKET_EXPORT = "ticket-export-2024"
CSV_COLUMNS = ("id", "title", "text", "equipment", "fault_code", "opened", "closed")
LAYOUT_MARKERS = {  # HTML comments in the sources that steer the PDF layout
    "<!-- pagebreak -->": "pagebreak",
    "<!-- scanned-page -->": "scan_start",
    "<!-- /scanned-page -->": "scan_end",
}
CAPTION = re.compile(r"^(表 [0-9A-Z]+(-\d+)?|Table \d+) \S")


def required_fonts() -> list[Path]:
    """The font files the generator needs; the PDFs and the scanned page embed their glyphs."""
    return [CJK_FONT, FALLBACK_FONT]


# -- the Markdown subset of the sources ----------------------------------------------------------


@dataclass
class Block:
    """One block of a source document: heading, paragraph, bullet, number, table or scan marker."""

    kind: str
    text: str = ""
    level: int = 0
    number: int = 0
    rows: list[list[str]] = field(default_factory=list)
    caption: str | None = None


@dataclass
class Source:
    name: str
    meta: dict[str, Any]  # the front matter, exactly as the Markdown original had it
    render: dict[str, str]  # generator-only keys (running header/footer, PDF subject)
    blocks: list[Block]


def iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date) else value


def read_source(path: Path) -> Source:
    text = path.read_text(encoding="utf-8")
    _, head, body = text.split("---\n", 2)
    front = {k: iso(v) for k, v in yaml.safe_load(head).items()}
    render = front.pop("render", None) or {}
    return Source(path.stem, front, render, parse_blocks(body))


def parse_blocks(body: str) -> list[Block]:
    blocks: list[Block] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line:
            continue
        if line in LAYOUT_MARKERS:
            blocks.append(Block(LAYOUT_MARKERS[line]))
        elif m := re.match(r"^(#{1,3}) (.+)$", line):
            blocks.append(Block("heading", m.group(2).strip(), level=len(m.group(1))))
        elif line.startswith("|"):
            rows = [line]
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(lines[i].strip())
                i += 1
            cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
            cells = [r for r in cells if not all(re.fullmatch(r":?-+:?", c) for c in r)]
            caption = None
            if blocks and blocks[-1].kind == "paragraph" and CAPTION.match(blocks[-1].text):
                caption = blocks.pop().text
            blocks.append(Block("table", rows=cells, caption=caption))
        elif m := re.match(r"^- (.+)$", line):
            blocks.append(Block("bullet", m.group(1)))
        elif m := re.match(r"^(\d+)\. (.+)$", line):
            blocks.append(Block("number", m.group(2), number=int(m.group(1))))
        else:
            para = [line]
            while (
                i < len(lines)
                and lines[i].strip()
                and not re.match(r"^(#|\||- |\d+\. |<!--)", lines[i].strip())
            ):
                para.append(lines[i].strip())
                i += 1
            blocks.append(Block("paragraph", " ".join(para)))
    return blocks


def plain(text: str) -> str:
    """Inline Markdown (only **bold** is used) as the characters that are drawn."""
    return text.replace("**", "")


def spans(text: str) -> Iterator[tuple[str, bool]]:
    """(text, bold) runs of inline Markdown."""
    for k, part in enumerate(text.split("**")):
        if part:
            yield part, k % 2 == 1


def item_text(block: Block) -> str:
    """A list item as drawn in the PDF and on the scan: the marker is part of the text."""
    prefix = "• " if block.kind == "bullet" else f"{block.number}. "
    return prefix + plain(block.text)


def metadata_strings(meta: dict[str, Any]) -> dict[str, str]:
    """Front matter as string-valued document properties; null values are left out."""
    out: dict[str, str] = {}
    for key in ("doc_id", "version", "valid_from", "valid_to", "doc_type", "language", "entities"):
        value = meta.get(key)
        if value is None:
            continue
        out[key] = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return out


# -- PDF: platypus with truth recording ----------------------------------------------------------


def register_fonts() -> None:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    if FONT not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont(FONT, str(CJK_FONT), subfontIndex=0))
        pdfmetrics.registerFont(TTFont(FALLBACK, str(FALLBACK_FONT)))


@functools.lru_cache(maxsize=1)
def probe_font() -> Any:
    from PIL import ImageFont

    return ImageFont.truetype(str(CJK_FONT), 48, index=0)


@functools.cache
def has_glyph(ch: str) -> bool:
    """Whether the CJK font draws ch. WenQuanYi Micro Hei maps some characters (℃) to an empty
    glyph, so this renders the glyph instead of trusting the cmap."""
    return ch.isspace() or probe_font().getmask(ch).getbbox() is not None


def markup(text: str) -> str:
    """Paragraph markup for plain text: escaped, with runs the CJK font lacks set in DejaVu Sans."""
    out: list[str] = []
    for ch in text:
        esc = html.escape(ch, quote=False)
        out.append(esc if has_glyph(ch) else f'<font name="{FALLBACK}">{esc}</font>')
    return "".join(out).replace(f'</font><font name="{FALLBACK}">', "")


@dataclass
class PageTruth:
    page: int
    kind: str
    header: str
    footer: str
    lines: list[str] = field(default_factory=list)
    # {'table': index into the document's tables, 'after_line': how many of lines precede it}
    tables: list[dict[str, int]] = field(default_factory=list)


@dataclass
class TableTruth:
    caption: str | None
    rows: list[list[str]]
    row_pages: list[int | None]

    def as_json(self) -> dict[str, Any]:
        pages = sorted({p for p in self.row_pages if p is not None})
        return {
            "caption": self.caption,
            "pages": pages,
            "rows": self.rows,
            "row_pages": self.row_pages,
        }


class PdfTruth:
    """Collects, while platypus draws, which text lines and table rows land on which page."""

    def __init__(self, header: str, footer: str) -> None:
        self.header, self.footer = header, footer
        self.pages: dict[int, PageTruth] = {}
        self.tables: list[TableTruth] = []
        self.headings: list[dict[str, Any]] = []

    def page(self, n: int, kind: str = "text") -> PageTruth:
        if n not in self.pages:
            self.pages[n] = PageTruth(n, kind, self.header, self.footer.format(page=n))
        return self.pages[n]

    def add_table(self, caption: str | None, rows: list[list[str]]) -> int:
        self.tables.append(TableTruth(caption, rows, [None] * len(rows)))
        return len(self.tables) - 1


def paragraph_lines(para: Any) -> list[str]:
    """The lines a wrapped platypus Paragraph drew, as text."""
    bl = para.blPara
    if bl.kind == 0:
        return [" ".join(words) for _, words in bl.lines]
    return ["".join(getattr(w, "text", "") for w in line.words) for line in bl.lines]


def pdf_flowable_classes() -> tuple[type, type, type]:
    from reportlab.platypus import Flowable, Paragraph, Table

    class WholeParagraph(Paragraph):
        """A paragraph that moves to the next page instead of splitting, so its lines stay whole."""

        truth_block: dict[str, Any] | None = None

        def split(self, availWidth: float, availHeight: float) -> list[Any]:
            return []

    class TrackedTable(Table):
        """A table whose fragments (after a page break) remember which source rows they hold."""

        truth_table: int = -1
        row_ids: list[int] = []

        def split(self, availWidth: float, availHeight: float) -> list[Any]:
            parts = super().split(availWidth, availHeight)
            taken = 0
            for k, part in enumerate(parts):
                n = len(part._cellvalues)
                part.truth_table = self.truth_table
                if k == 0:
                    part.row_ids = self.row_ids[:n]
                else:
                    rep = self.repeatRows if isinstance(self.repeatRows, int) else 0
                    part.row_ids = self.row_ids[:rep] + self.row_ids[taken : taken + n - rep]
                    n -= rep
                taken += n
            return parts

    class ScanMarker(Flowable):
        """Stands on the scanned page so platypus emits it; the page template draws the image."""

        def wrap(self, availWidth: float, availHeight: float) -> tuple[float, float]:
            return (0, 0)

        def draw(self) -> None:
            pass

    return WholeParagraph, TrackedTable, ScanMarker


def make_info_canvas(extra: dict[str, str]) -> type:
    """A Canvas whose document info dictionary carries the custom metadata keys."""
    from reportlab.pdfbase.pdfdoc import PDFDate, PDFDictionary, PDFInfo, PDFName, PDFString
    from reportlab.pdfgen.canvas import Canvas

    class MetadataInfo(PDFInfo):
        def format(self, document: Any) -> bytes:
            D: dict[str, Any] = {}  # the name PDFInfo.format uses
            D["Title"] = PDFString(self.title)
            D["Author"] = PDFString(self.author)
            D["ModDate"] = D["CreationDate"] = PDFDate(
                ts=document._timeStamp, dateFormatter=self._dateFormatter
            )
            D["Producer"] = PDFString(self.producer)
            D["Creator"] = PDFString(self.creator)
            D["Subject"] = PDFString(self.subject)
            D["Keywords"] = PDFString(self.keywords)
            D["Trapped"] = PDFName(self.trapped)
            for key, value in extra.items():
                D[key] = PDFString(value)
            return PDFDictionary(D).format(document)

    class InfoCanvas(Canvas):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._doc.info = MetadataInfo()

    return InfoCanvas


def build_pdf(src: Source) -> tuple[bytes, dict[str, Any]]:
    from reportlab import rl_config
    from reportlab.lib import colors
    from reportlab.lib.enums import TA_CENTER
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.lib.units import mm
    from reportlab.lib.utils import ImageReader
    from reportlab.platypus import (
        BaseDocTemplate,
        CondPageBreak,
        Frame,
        KeepTogether,
        NextPageTemplate,
        PageBreak,
        PageTemplate,
        Spacer,
        TableStyle,
    )

    register_fonts()
    WholeParagraph, TrackedTable, ScanMarker = pdf_flowable_classes()
    width, height = A4
    margin_x, margin_top, margin_bottom = 20 * mm, 24 * mm, 20 * mm
    header, footer = src.render["header"], src.render["footer"]
    for ch in header + footer:
        if not has_glyph(ch):
            raise SystemExit(f"{CJK_FONT.name} lacks {ch!r} used in the running header/footer")
    truth = PdfTruth(header, footer)

    def style(
        name: str, size: float, leading: float, before: float, after: float, **kw: Any
    ) -> ParagraphStyle:
        return ParagraphStyle(
            name,
            fontName=FONT,
            fontSize=size,
            leading=leading,
            spaceBefore=before,
            spaceAfter=after,
            wordWrap="CJK",
            **kw,
        )

    styles = {
        1: style("h1", 18, 26, 0, 10, keepWithNext=1),
        2: style("h2", 14, 20, 10, 6, keepWithNext=1),
        3: style("h3", 12, 17, 8, 4, keepWithNext=1),
        "body": style("body", 10.5, 16, 0, 5),
        "item": style("item", 10.5, 16, 0, 3, leftIndent=16, firstLineIndent=-12),
        "caption": style("caption", 10.5, 15, 6, 4, alignment=TA_CENTER),
        "cell": style("cell", 9.5, 13, 0, 0),
    }
    frame_w = width - 2 * margin_x

    made: list[Any] = []  # every body paragraph, to check that each was recorded once

    def para(text: str, st: Any, kind: str, level: int = 0) -> Any:
        p = WholeParagraph(markup(text), st)
        p.truth_block = {"kind": kind, "text": text, "level": level}
        made.append(p)
        return p

    def table(block: Block) -> list[Any]:
        rows = [[plain(c) for c in r] for r in block.rows]
        ncol = len(rows[0])
        ratios = {2: [0.42, 0.58], 3: [0.16, 0.34, 0.50], 4: [0.19, 0.31, 0.30, 0.20]}.get(
            ncol, [1 / ncol] * ncol
        )
        if ncol == 3 and len(rows[0][2]) > 2:  # the revision table: a long last column
            ratios = [0.10, 0.16, 0.74]
        data = [[WholeParagraph(markup(c), styles["cell"]) for c in r] for r in rows]
        t = TrackedTable(data, colWidths=[r * frame_w for r in ratios], repeatRows=1)
        t.setStyle(
            TableStyle(
                [
                    ("GRID", (0, 0), (-1, -1), 0.5, colors.black),
                    ("BACKGROUND", (0, 0), (-1, 0), colors.Color(0.88, 0.88, 0.88)),
                    ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
                    ("TOPPADDING", (0, 0), (-1, -1), 3),
                    ("BOTTOMPADDING", (0, 0), (-1, -1), 4),
                ]
            )
        )
        t.truth_table = truth.add_table(block.caption, rows)
        t.row_ids = list(range(len(rows)))
        cap = [para(block.caption, styles["caption"], "caption")] if block.caption else []
        if len(rows) <= LONG_TABLE:  # a short table moves whole to the next page, with the
            # heading right above it (keepWithNext does not hold a heading to a KeepTogether)
            heads: list[Any] = []
            while (
                story and (getattr(story[-1], "truth_block", None) or {}).get("kind") == "heading"
            ):
                heads.insert(0, story.pop())
            return [KeepTogether([*heads, *cap, t]), Spacer(1, 6)]
        # a long one starts where it is (if some rows fit) and continues on the next page
        return [CondPageBreak(50 * mm), *cap, t, Spacer(1, 6)]

    story: list[Any] = []
    scan_blocks: list[Block] = []
    in_scan = False
    for block in src.blocks:
        if block.kind == "scan_start":
            in_scan = True
            story += [NextPageTemplate("scan"), PageBreak(), ScanMarker()]
        elif block.kind == "scan_end":
            in_scan = False
        elif block.kind == "pagebreak":
            story.append(PageBreak())
        elif in_scan:
            scan_blocks.append(block)
        elif block.kind == "heading":
            story.append(para(plain(block.text), styles[block.level], "heading", block.level))
        elif block.kind == "paragraph":
            story.append(para(plain(block.text), styles["body"], "paragraph"))
        elif block.kind in ("bullet", "number"):
            story.append(para(item_text(block), styles["item"], "item"))
        elif block.kind == "table":
            story += table(block)

    class ManualDoc(BaseDocTemplate):
        """SimpleDocTemplate's page layout, plus a second page template for the scanned page,
        recording where each body paragraph and table row was drawn."""

        def afterFlowable(self, flowable: Any) -> None:
            n = self.page
            tb = getattr(flowable, "truth_block", None)
            if tb is not None:
                page = truth.page(n)
                page.lines += paragraph_lines(flowable)
                if tb["kind"] == "heading":
                    truth.headings.append({"level": tb["level"], "text": tb["text"], "page": n})
                flowable.truth_block = None  # recorded once
            tid = getattr(flowable, "truth_table", -1)
            if tid >= 0:
                tt = truth.tables[tid]
                for r in flowable.row_ids:
                    if tt.row_pages[r] is None:
                        tt.row_pages[r] = n
                page = truth.page(n)
                if all(t["table"] != tid for t in page.tables):
                    page.tables.append({"table": tid, "after_line": len(page.lines)})

    def decorate(canv: Any, doc: Any) -> None:
        n = canv.getPageNumber()
        canv.saveState()
        canv.setFont(FONT, 9)
        canv.drawString(margin_x, height - 14 * mm, header)
        canv.setLineWidth(0.5)
        canv.line(margin_x, height - 16 * mm, width - margin_x, height - 16 * mm)
        canv.drawCentredString(width / 2, 11 * mm, footer.format(page=n))
        canv.restoreState()
        truth.page(n)

    def draw_scan(canv: Any, doc: Any) -> None:
        n = canv.getPageNumber()
        jpeg, page = render_scan(scan_blocks, header, footer.format(page=n))
        canv.drawImage(ImageReader(io.BytesIO(jpeg)), 0, 0, width=width, height=height)
        page.page = n
        truth.pages[n] = page
        truth.headings += [{**h, "page": n} for h in page.headings]
        for tt, after in page.tables_json:
            tt.row_pages = [n] * len(tt.rows)
            truth.tables.append(tt)
            page.tables.append({"table": len(truth.tables) - 1, "after_line": after})

    extra = metadata_strings(src.meta)
    buf = io.BytesIO()
    doc = ManualDoc(
        buf,
        pagesize=A4,
        leftMargin=margin_x,
        rightMargin=margin_x,
        topMargin=margin_top,
        bottomMargin=margin_bottom,
        title=src.meta["title"],
        author=AUTHOR,
        subject=src.render["subject"],
        creator="rag_lab scripts/make_sample_documents.py",
        keywords=extra["entities"],
        lang=src.meta["language"],
        invariant=1,
    )
    body = Frame(margin_x, margin_bottom, frame_w, height - margin_top - margin_bottom, id="body")
    scan = Frame(0, 0, width, height, id="scan", leftPadding=0, rightPadding=0)
    doc.addPageTemplates(
        [
            PageTemplate("body", [body], onPage=decorate),
            PageTemplate("scan", [scan], onPage=draw_scan),
        ]
    )
    saved_a85 = rl_config.useA85
    rl_config.useA85 = 0  # binary streams: the scan's JPEG is embedded as is, not 25 % larger
    try:
        doc.build(story, canvasmaker=make_info_canvas(extra))
    finally:
        rl_config.useA85 = saved_a85

    for tt in truth.tables:
        assert None not in tt.row_pages, f"{src.name}: a table row was never drawn"
    assert all(p.truth_block is None for p in made), f"{src.name}: a paragraph was not recorded"
    pages = [truth.pages[n] for n in sorted(truth.pages)]
    record = {
        "doc_id": src.meta["doc_id"],
        "format": "pdf",
        "title": src.meta["title"],
        "metadata": extra,
        "page_count": len(pages),
        "header": header,
        "footer": footer,
        "headings": truth.headings,
        "pages": [
            {
                "page": p.page,
                "kind": p.kind,
                "header": p.header,
                "footer": p.footer,
                "lines": p.lines,
                "tables": p.tables,
                **({"image": p.image} if isinstance(p, ScanPage) else {}),
            }
            for p in pages
        ],
        "tables": [t.as_json() for t in truth.tables],
    }
    return buf.getvalue(), record


# -- the scanned page ----------------------------------------------------------------------------


@dataclass
class ScanPage(PageTruth):
    tables_json: list[tuple[TableTruth, int]] = field(default_factory=list)
    headings: list[dict[str, Any]] = field(default_factory=list)
    image: dict[str, Any] = field(default_factory=dict)


DPI = 300
A4_PX = (2480, 3508)
LONG_TABLE = 15  # rows (header included) above which a PDF table may cross a page break


def px(mm_: float) -> int:
    return round(mm_ / 25.4 * DPI)


class MixedFont:
    """WenQuanYi Micro Hei at a pixel size, with DejaVu Sans for the characters it lacks."""

    def __init__(self, pt: float) -> None:
        from PIL import ImageFont

        self.size = round(pt / 72 * DPI)
        self.main = ImageFont.truetype(str(CJK_FONT), self.size, index=0)
        self.fallback = ImageFont.truetype(str(FALLBACK_FONT), self.size)

    def runs(self, text: str) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for ch in text:
            font = self.main if has_glyph(ch) else self.fallback
            if out and out[-1][1] is font:
                out[-1] = (out[-1][0] + ch, font)
            else:
                out.append((ch, font))
        return out

    def getlength(self, text: str) -> float:
        return sum(font.getlength(t) for t, font in self.runs(text))

    def draw(self, draw: Any, xy: tuple[float, float], text: str, align: str = "left") -> None:
        """Draw text with its top-left (align='left') or top-centre ('center') at xy."""
        x, y = xy
        if align == "center":
            x -= self.getlength(text) / 2
        ascent = self.main.getmetrics()[0]
        for t, font in self.runs(text):
            # align the runs on the main font's baseline
            draw.text((x, y + ascent), t, font=font, fill=0, anchor="ls")
            x += font.getlength(t)


def wrap_px(text: str, font: Any, max_w: int) -> list[str]:
    """Greedy wrap: Latin words and numbers stay whole, CJK breaks anywhere, no line starts with
    closing punctuation."""
    tokens = re.findall(r"[A-Za-z0-9.\-/]+|\s+|.", text)
    lines: list[str] = []
    cur = ""
    for tok in tokens:
        trial = cur + tok
        if cur and font.getlength(trial) > max_w and tok not in "，。；：、）”":
            lines.append(cur.rstrip())
            cur = tok.lstrip()
        else:
            cur = trial
    if cur.strip():
        lines.append(cur.rstrip())
    return lines


def render_scan_image(blocks: list[Block], header: str, footer: str) -> tuple[Any, ScanPage]:
    """The page as a 300 dpi greyscale image, and the text it shows."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter

    img = Image.new("L", A4_PX, 255)
    draw = ImageDraw.Draw(img)
    left, right = px(20), A4_PX[0] - px(20)
    small, body, head, cell = MixedFont(9), MixedFont(10.5), MixedFont(14), MixedFont(CELL_PT)
    page = ScanPage(0, "scanned", header, footer)

    small.draw(draw, (left, px(10.5)), header)
    draw.line([(left, px(16)), (right, px(16))], fill=0, width=3)
    small.draw(draw, (A4_PX[0] / 2, A4_PX[1] - px(14)), footer, align="center")
    y = px(28)
    for block in blocks:
        if block.kind == "heading":
            head.draw(draw, (left, y), plain(block.text))
            page.lines.append(plain(block.text))
            page.headings.append({"level": block.level, "text": plain(block.text)})
            y += round(head.size * 2.0)
        elif block.kind in ("paragraph", "bullet", "number"):
            text = plain(block.text) if block.kind == "paragraph" else item_text(block)
            for line in wrap_px(text, body, right - left):
                body.draw(draw, (left, y), line)
                page.lines.append(line)
                y += round(body.size * 1.6)
            y += round(body.size * 0.8)
        elif block.kind == "table":
            if block.caption:
                body.draw(draw, (A4_PX[0] / 2, y), block.caption, align="center")
                page.lines.append(block.caption)
                y += round(body.size * 1.8)
            n_before = len(page.lines)
            rows = [[plain(c) for c in r] for r in block.rows]
            widths = [0.13, 0.37, 0.50] if len(rows[0]) == 3 else [1 / len(rows[0])] * len(rows[0])
            xs = [left]
            for w in widths:
                xs.append(xs[-1] + round(w * (right - left)))
            xs[-1] = right
            pad = px(CELL_PAD_MM)
            top = y
            for r in rows:
                wrapped = [wrap_px(c, cell, xs[k + 1] - xs[k] - 2 * pad) for k, c in enumerate(r)]
                row_h = max(len(w) for w in wrapped) * round(cell.size * 1.35) + 2 * pad
                for k, cell_lines in enumerate(wrapped):
                    for j, line in enumerate(cell_lines):
                        yy = y + pad + j * round(cell.size * 1.35) + round(cell.size * 0.1)
                        cell.draw(draw, (xs[k] + pad, yy), line)
                draw.line([(left, y), (right, y)], fill=0, width=3)
                y += row_h
            draw.line([(left, y), (right, y)], fill=0, width=3)
            for x in xs:
                draw.line([(x, top), (x, y)], fill=0, width=3)
            page.tables_json.append((TableTruth(block.caption, rows, [None] * len(rows)), n_before))
            y += round(body.size * 1.2)
    assert y < A4_PX[1] - px(20), "the scanned page overflows"

    # a light scanner look: a touch of blur and grey noise, reproducible from a fixed seed
    img = img.filter(ImageFilter.GaussianBlur(BLUR_RADIUS))
    rng = np.random.default_rng(SEED)
    noise = rng.normal(0, NOISE_SIGMA, (A4_PX[1], A4_PX[0]))
    arr = np.clip(np.rint(np.asarray(img, dtype=np.float64) + noise), 0, 255)
    img = Image.fromarray(arr.astype(np.uint8), mode="L")
    page.image = {"dpi": DPI, "width": A4_PX[0], "height": A4_PX[1], "format": "JPEG", "mode": "L"}
    return img, page


def render_scan(blocks: list[Block], header: str, footer: str) -> tuple[bytes, ScanPage]:
    img, page = render_scan_image(blocks, header, footer)
    out = io.BytesIO()
    img.save(out, "JPEG", quality=85, optimize=True, dpi=(DPI, DPI))
    return out.getvalue(), page


# -- HTML -----------------------------------------------------------------------------------------

HTML_BOILERPLATE = {
    "site": "HX 液压设备服务中心",
    "nav": ["首页", "产品中心", "下载中心", "技术支持", "培训与活动", "联系我们"],
    "breadcrumb": ["首页", "下载中心", "固件与软件", "HX-200 液压站"],
    "sidebar_title": "您可能还感兴趣",
    "sidebar": [
        "2024 年秋季用户培训报名",
        "液压油选型指南（产品样本下载）",
        "经销商与服务网点查询",
        "新品发布：紧凑型液压站系列",
        "加入我们：服务工程师招聘",
    ],
    "cookie": (
        "本网站使用 Cookie 改善浏览体验并统计访问量。继续浏览即表示您同意我们的 Cookie 政策。"
    ),
    "cookie_buttons": ["接受全部", "仅必要 Cookie"],
    "footer": [
        "© 2023 HX 液压设备服务中心 版权所有",
        "服务热线 400-000-0000（工作日 8:30–17:30）",
        "隐私政策",
        "网站地图",
    ],
}


def inline_html(text: str) -> str:
    return "".join(
        f"<strong>{html.escape(t)}</strong>" if bold else html.escape(t) for t, bold in spans(text)
    )


def build_html(src: Source) -> tuple[bytes, dict[str, Any]]:
    bp = HTML_BOILERPLATE
    meta = metadata_strings(src.meta)
    esc = html.escape
    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="zh">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(src.meta['title'])}</title>",
    ]
    out += [f'<meta name="{k}" content="{esc(v)}">' for k, v in meta.items()]
    out += [
        '<link rel="stylesheet" href="/static/css/site.css">',
        '<script src="/static/js/analytics.js" defer></script>',
        "</head>",
        "<body>",
        '<div class="cookie-banner" id="cookie-banner" role="dialog">',
        f"  <p>{esc(bp['cookie'])}</p>",
        *[f'  <button type="button">{esc(b)}</button>' for b in bp["cookie_buttons"]],
        "</div>",
        '<header class="site-header">',
        f'  <a class="logo" href="/">{esc(bp["site"])}</a>',
        '  <form class="search" action="/search"><input type="search" name="q" '
        'placeholder="搜索产品、文档"><button>搜索</button></form>',
        "</header>",
        '<nav class="main-nav">',
        "  <ul>",
        *[f'    <li><a href="/{k}">{esc(item)}</a></li>' for k, item in enumerate(bp["nav"])],
        "  </ul>",
        "</nav>",
        '<div class="page">',
        '<nav class="breadcrumb">'
        + " › ".join(f'<a href="/b{k}">{esc(b)}</a>' for k, b in enumerate(bp["breadcrumb"]))
        + "</nav>",
        "<main>",
        "<article>",
    ]
    headings: list[dict[str, Any]] = []
    tables: list[dict[str, Any]] = []
    open_list: str | None = None
    for block in src.blocks:
        kind = {"bullet": "ul", "number": "ol"}.get(block.kind)
        if open_list and kind != open_list:
            out.append(f"</{open_list}>")
            open_list = None
        if kind and not open_list:
            out.append(f"<{kind}>")
            open_list = kind
        if block.kind == "heading":
            out.append(f"<h{block.level}>{inline_html(block.text)}</h{block.level}>")
            headings.append({"level": block.level, "text": plain(block.text)})
        elif block.kind == "paragraph":
            out.append(f"<p>{inline_html(block.text)}</p>")
        elif kind:
            out.append(f"  <li>{inline_html(block.text)}</li>")
        elif block.kind == "table":
            rows = [[plain(c) for c in r] for r in block.rows]
            out.append("<table>")
            if block.caption:
                out.append(f"  <caption>{esc(block.caption)}</caption>")
            out.append("  <thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in rows[0]))
            out.append("  </tr></thead>")
            out.append("  <tbody>")
            for r in rows[1:]:
                out.append("    <tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>")
            out += ["  </tbody>", "</table>"]
            tables.append({"caption": block.caption, "rows": rows})
    if open_list:
        out.append(f"</{open_list}>")
    out += [
        "</article>",
        "</main>",
        '<aside class="sidebar">',
        f"  <h3>{esc(bp['sidebar_title'])}</h3>",
        "  <ul>",
        *[f'    <li><a href="/news/{k}">{esc(s)}</a></li>' for k, s in enumerate(bp["sidebar"])],
        "  </ul>",
        "</aside>",
        "</div>",
        '<footer class="site-footer">',
        *[f"  <p>{esc(f)}</p>" for f in bp["footer"]],
        "</footer>",
        "</body>",
        "</html>",
        "",
    ]
    boilerplate = [
        bp["site"],
        *bp["nav"],
        *bp["breadcrumb"],
        bp["sidebar_title"],
        *bp["sidebar"],
        bp["cookie"],
        *bp["cookie_buttons"],
        *bp["footer"],
    ]
    record = {
        "doc_id": src.meta["doc_id"],
        "format": "html",
        "title": src.meta["title"],
        "metadata": meta,
        "headings": headings,
        "tables": tables,
        "boilerplate": boilerplate,
    }
    return "\n".join(out).encode("utf-8"), record


# -- DOCX -----------------------------------------------------------------------------------------

DOCX_TIME = dt.datetime(2023, 1, 1, 8, 0, 0, tzinfo=dt.timezone.utc)
ZIP_TIME = (2023, 1, 1, 8, 0, 0)


def build_docx(src: Source) -> tuple[bytes, dict[str, Any]]:
    import docx
    from docx.shared import Pt

    d = docx.Document()
    headings: list[dict[str, Any]] = []
    tables: list[dict[str, Any]] = []

    def add_runs(par: Any, text: str) -> None:
        for t, bold in spans(text):
            par.add_run(t).bold = bold or None

    for block in src.blocks:
        if block.kind == "heading":
            style = {1: "Title", 2: "Heading 1", 3: "Heading 2"}[block.level]
            d.add_paragraph(plain(block.text), style=style)
            headings.append({"level": block.level, "style": style, "text": plain(block.text)})
        elif block.kind == "paragraph":
            add_runs(d.add_paragraph(), block.text)
        elif block.kind in ("bullet", "number"):
            style = "List Bullet" if block.kind == "bullet" else "List Number"
            add_runs(d.add_paragraph(style=style), block.text)
        elif block.kind == "table":
            rows = [[plain(c) for c in r] for r in block.rows]
            if block.caption:
                d.add_paragraph(block.caption, style="Caption")
            t = d.add_table(rows=len(rows), cols=len(rows[0]))
            t.style = "Table Grid"
            for i, r in enumerate(rows):
                for j, c in enumerate(r):
                    par = t.cell(i, j).paragraphs[0]
                    run = par.add_run(c)
                    run.font.size = Pt(9.5)
                    run.bold = True if i == 0 else None
            tables.append({"caption": block.caption, "rows": rows})
    meta = src.meta
    cp = d.core_properties
    cp.title = meta["title"]
    cp.author = AUTHOR
    cp.last_modified_by = AUTHOR
    cp.identifier = meta["doc_id"]
    cp.version = str(meta["version"])
    cp.language = meta["language"]
    cp.category = meta["doc_type"]
    cp.keywords = ", ".join(meta["entities"])
    rest = {k: meta[k] for k in ("valid_from", "valid_to") if meta.get(k) is not None}
    cp.comments = "\n".join(f"{k}: {v}" for k, v in rest.items())
    cp.subject = "Maintenance procedure"
    cp.created = cp.modified = DOCX_TIME.replace(tzinfo=None)
    cp.revision = 1
    raw = io.BytesIO()
    d.save(raw)
    record = {
        "doc_id": meta["doc_id"],
        "format": "docx",
        "title": meta["title"],
        "metadata": {
            "identifier": cp.identifier,
            "version": cp.version,
            "language": cp.language,
            "category": cp.category,
            "keywords": cp.keywords,
            "comments": cp.comments,
        },
        "headings": headings,
        "tables": tables,
    }
    return fixed_zip(raw.getvalue()), record


def fixed_zip(data: bytes) -> bytes:
    """The same archive with fixed entry timestamps and attributes, so the bytes reproduce."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        for item in zin.infolist():
            info = zipfile.ZipInfo(item.filename, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3
            zout.writestr(info, zin.read(item.filename), compresslevel=9)
    return out.getvalue()


# -- CSV ------------------------------------------------------------------------------------------


def build_csv(path: Path) -> tuple[bytes, dict[str, Any]]:
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    extra = sorted({k for r in records for k in r["metadata"]} - set(CSV_COLUMNS))
    columns = [*CSV_COLUMNS, *extra]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")  # as Excel writes it
    w.writerow(columns)
    for r in records:
        values = {"id": r["_id"], "title": r["title"], "text": r["text"], **r["metadata"]}
        w.writerow(["" if values.get(c) is None else values[c] for c in columns])
    record = {
        "format": "csv",
        "encoding": "utf-8-sig",
        "columns": columns,
        "id_field": "id",
        "text_fields": ["text"],
        "title_field": "title",
        "ids": [r["_id"] for r in records],
        "multiline_ids": [r["_id"] for r in records if "\n" in r["text"]],
    }
    return ("\ufeff" + buf.getvalue()).encode("utf-8"), record


# -- driver ---------------------------------------------------------------------------------------

TRUTH_NOTE = (
    "Ground truth for parser-quality measurement, written by scripts/make_sample_documents.py. "
    "PDF pages: kind is 'text' or 'scanned' (an image with no text layer; its header, footer, "
    "lines and table were drawn into the image). 'lines' are the body text lines in drawing "
    "order exactly as drawn: headings, paragraphs, list items and table captions, wrapped as on "
    "the page; the running header/footer and table cells are not in 'lines'. Tables: rows of "
    "cell strings, header row first; a table crossing pages is listed once with all its pages, "
    "'row_pages' gives the page of each row (the repeated header on a continuation page is not "
    "a row). 'tables' on a page are indexes into the document's tables. HTML/DOCX: headings and "
    "tables; 'boilerplate' lists page furniture (navigation, cookie banner, sidebar, footer) "
    "that is not part of the document."
)


def generate(out: Path, sources: Path = SOURCES) -> dict[str, Path]:
    """Write every generated file under out (a dataset root); return {relative path: file}."""
    missing = [str(p) for p in required_fonts() if not p.exists()]
    if missing:
        raise SystemExit(f"missing fonts {missing} (Debian: fonts-wqy-microhei, fonts-dejavu-core)")
    docs = out / "docs"
    files: dict[str, bytes] = {}
    truth: dict[str, Any] = {}
    jobs: list[tuple[str, str, Callable[[Source], tuple[bytes, dict[str, Any]]]]] = [
        *[(f"manuals/{n}", ".pdf", build_pdf) for n in PDF_MANUALS],
        *[(f"release_notes/{n}", ".html", build_html) for n in HTML_NOTES],
        *[(f"manuals/{n}", ".docx", build_docx) for n in DOCX_MANUALS],
    ]
    for stem, ext, build in jobs:
        data, record = build(read_source(sources / f"{stem}.md"))
        files[stem + ext] = data
        truth[stem + ext] = record
    csv_rel = f"tickets/{TICKET_EXPORT}.csv"
    files[csv_rel], truth[csv_rel] = build_csv(sources / "tickets" / f"{TICKET_EXPORT}.jsonl")

    written: dict[str, Path] = {}
    for rel, data in files.items():
        path = docs / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written[f"docs/{rel}"] = path
    doc = {"description": TRUTH_NOTE, "documents": truth}
    path = out / "parsing_truth.json"
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    written["parsing_truth.json"] = path
    return written


def levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def reading_order(doc: dict[str, Any], page: dict[str, Any]) -> str:
    """A page's body text in drawing order: its lines with the table cells (row by row) put in at
    their places. A table crossing pages is given whole on its first page."""
    parts: list[str] = []
    at = {t["after_line"]: t["table"] for t in page["tables"]}
    for k in range(len(page["lines"]) + 1):
        if k in at:
            table = doc["tables"][at[k]]
            if table["pages"][0] == page["page"]:
                parts += [c for r in table["rows"] for c in r]
        if k < len(page["lines"]):
            parts.append(page["lines"][k])
    return "\n".join(parts)


def ocr_check(out: Path) -> None:
    """OCR the scanned page image as embedded in the PDF and print the character error rate."""
    import pdfplumber
    import pytesseract
    from PIL import Image

    truth = json.loads((out / "parsing_truth.json").read_text(encoding="utf-8"))
    for rel, doc in truth["documents"].items():
        for page in doc.get("pages", []):
            if page["kind"] != "scanned":
                continue
            with pdfplumber.open(out / "docs" / rel) as pdf:
                img_obj = pdf.pages[page["page"] - 1].images[0]
                jpeg = img_obj["stream"].get_data()
            img = Image.open(io.BytesIO(jpeg))
            hyp = pytesseract.image_to_string(img, lang="chi_sim+eng")
            ref = squash(page["header"] + reading_order(doc, page) + page["footer"])
            cells = [
                c for t in page["tables"] for r in doc["tables"][t["table"]]["rows"] for c in r
            ]
            h = squash(hyp)
            cer = levenshtein(ref, h) / len(ref)
            print(f"{rel} page {page['page']}: CER {cer:.3f} over {len(ref)} characters")
            found = sum(squash(c) in h for c in cells)
            print(f"  table cells found verbatim in the OCR text: {found}/{len(cells)}")
            lines_found = sum(squash(x) in h for x in page["lines"])
            print(f"  body lines found verbatim: {lines_found}/{len(page['lines'])}")
            print(hyp)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DATASET, help="dataset root (default: the sample)")
    ap.add_argument("--sources", type=Path, default=SOURCES, help=argparse.SUPPRESS)
    ap.add_argument("--ocr-check", action="store_true", help="OCR the scanned page, print its CER")
    args = ap.parse_args(argv)
    for rel, path in generate(args.out, args.sources).items():
        print(f"{rel}  {path.stat().st_size:>8} bytes")
    if args.ocr_check:
        ocr_check(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
