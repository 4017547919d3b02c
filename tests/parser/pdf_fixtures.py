"""Builders of the PDFs that tests/parser/test_pdf.py parses: reportlab (``invariant=1``, so the
bytes are the same on every run) for text-layer pages, Pillow for scanned pages.

The source strings are module constants, so the tests compare the parser's output with exactly
what was drawn. ``set_info_keys`` shows how to write custom document-info keys (``doc_id``,
``version``, ``valid_from``, ...) with reportlab, which has no public API for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")
SANS_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
SANS_BOLD_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")

HEADER = "HX-200 维修手册 V2.1"
FOOTER = "内部资料 第 {page} 页"
TITLE = "HX-200 液压泵维修手册"
INFO_KEYS = {
    "doc_id": "hx200-manual",
    "version": "2.1",
    "valid_from": "2024-01-15",
    "valid_to": "2026-12-31",
    "source_type": "manual_pdf",
    "doc_type": "manual",
    "language": "zh",
    "empty_key": "",
    "null_key": "null",
}

# the first page's body, paragraph by paragraph (<sub> marks a subscript)
POWER = (
    "Power is P = U × I, where U<sub>1</sub> = 230 V is the supply voltage and "
    "P<sub>max</sub> = 5 kW."
)
POWER_TEXT = "Power is P = U × I, where U1 = 230 V is the supply voltage and Pmax = 5 kW."
SYMBOLS = (
    "Keep the pressure ≤ 0.5 MPa and the oil within ±2 ℃ of 40 ℃; the coil reads 10 Ω, "
    "the gap is 25 μm and the flow is ≥ 12 L/min."
)
CHINESE = (
    "液压泵在启动前必须检查油位，油温不得超过六十摄氏度。如果发现异常噪声，应立即停机并通知维修"
    "人员进行检查，不得带故障运行。更换滤芯时应先释放系统压力，再按照规定的力矩拧紧螺栓。"
)
SPEC_CAPTION = "表 1 技术参数"
SPEC_TABLE = [
    ["参数", "数值", "单位"],
    ["额定压力", "≤ 0.5", "MPa"],
    ["工作温度", "40 ± 2", "℃"],
    ["线圈电阻", "10", "Ω"],
    ["流量 Flow", "≥ 12", "L/min"],
    ["备注", "出厂已校准", "出厂已校准"],  # the last two cells are one merged cell
]
AFTER_TABLE = "The table above lists the rated values."
CHAPTER = "3 检查"
SECTION = "3.2 检查步骤"
STEP_TEXT = "检查步骤第二页：先断电，再拆下护罩，最后测量线圈电阻。"
SPLIT_CAPTION = "Table 2 Fault codes"
SPLIT_TABLE = [["Code", "Meaning", "Action"]] + [
    [f"E{100 + i}", f"Fault number {i}", f"Step {i} × 2"] for i in range(40)
]
OTHER_CAPTION = "Table 3 Spare parts"
OTHER_TABLE = [["Part", "Number", "Stock"], ["Seal kit", "HX-7", "12"], ["Filter", "HX-9", "4"]]

# the scanned page (drawn with Pillow at 300 dpi, embedded as an image)
SCAN_HEADING = "7.1 Bleeding the pump"  # 16 pt
SCAN_LINES = [
    "Scanned page: the pump must be bled before the first start.",
    "Check the oil level every 500 hours and replace the filter",
    "when the pressure drop exceeds 0.3 MPa.",
]
# Tesseract given eng+chi_sim reads this line as English garbage; chi_sim alone reads it right
SCAN_CHINESE = "液压泵在启动前必须检查油位，油温不得超过六十摄氏度。"
SCAN_TABLE = [
    ["Part", "Interval", "Torque"],
    ["Filter", "500 h", "25 Nm"],
    ["Seal", "1000 h", "40 Nm"],
    ["Valve", "2000 h", "15 Nm"],
]
SCAN_AFTER = "Tighten all bolts after the test run."
SPACED_CHINESE = "字间距加宽的中文标题行"  # drawn letter-spaced on the page before the scan


def have_cjk_font() -> bool:
    return CJK_FONT.is_file()


def register_fonts() -> None:
    """Register ``WQY`` (CJK, also Latin and the symbols ≤ ± ℃ Ω μ) and ``DejaVu-Bold``."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    if "WQY" not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont("WQY", str(CJK_FONT), subfontIndex=0))
    if "DejaVu-Bold" not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont("DejaVu-Bold", str(SANS_BOLD_FONT)))


def set_info_keys(canvas: Any, keys: Mapping[str, str]) -> None:
    """Write custom keys into the PDF's document-info dictionary (``/doc_id (hx200-manual)``).

    reportlab writes only the standard keys (``setTitle``, ``setAuthor``, ``setSubject``,
    ``setKeywords``, ``setCreator``); this swaps the class of the canvas's private
    ``_doc.info`` object for a subclass whose ``format`` appends the extra keys to the dictionary
    reportlab produces. Keys must be PDF names (no spaces, no ``/()<>[]{}%#``); values are
    written as PDF text strings (Unicode and encryption handled by reportlab).
    """
    from reportlab.pdfbase.pdfdoc import PDFString

    info = canvas._doc.info
    base = type(info)

    class _InfoWithKeys(base):  # type: ignore[misc, valid-type]
        def format(self, document: Any) -> bytes:
            out: bytes = base.format(self, document)
            end = out.rindex(b">>")
            extra = b"".join(
                b"/%s %s\n" % (k.encode("ascii"), PDFString(v).format(document))
                for k, v in keys.items()
            )
            return out[:end] + extra + out[end:]

    info.__class__ = _InfoWithKeys


def _styles() -> dict[str, Any]:
    from reportlab.lib.styles import ParagraphStyle

    register_fonts()
    return {
        "title": ParagraphStyle("title", fontName="WQY", fontSize=20, leading=26, spaceAfter=12),
        "h1": ParagraphStyle(
            "h1", fontName="DejaVu-Bold", fontSize=15, leading=19, spaceBefore=8, spaceAfter=6
        ),
        "h1cjk": ParagraphStyle(
            "h1cjk", fontName="WQY", fontSize=15, leading=19, spaceBefore=8, spaceAfter=6
        ),
        "h2cjk": ParagraphStyle(
            "h2cjk", fontName="WQY", fontSize=13, leading=17, spaceBefore=6, spaceAfter=4
        ),
        "body": ParagraphStyle(
            "body", fontName="WQY", fontSize=10.5, leading=14, spaceAfter=8, wordWrap="CJK"
        ),
        "caption": ParagraphStyle("caption", fontName="WQY", fontSize=10.5, leading=14),
    }


def _table(rows: Sequence[Sequence[str]], spans: Sequence[Any] = (), repeat: int = 0) -> Any:
    from reportlab.lib import colors
    from reportlab.platypus import Table, TableStyle

    style = [
        ("FONT", (0, 0), (-1, -1), "WQY", 10),
        ("GRID", (0, 0), (-1, -1), 0.5, colors.black),
        ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
        *[("SPAN", a, b) for a, b in spans],
    ]
    return Table([list(r) for r in rows], style=TableStyle(style), repeatRows=repeat, hAlign="LEFT")


def _header_footer(canvas: Any, doc: Any) -> None:
    canvas.saveState()
    canvas.setFont("WQY", 9)
    canvas.drawString(72, 842 - 40, HEADER)
    canvas.drawRightString(595 - 72, 30, FOOTER.format(page=doc.page))
    canvas.restoreState()


def manual_pdf(path: Path) -> Path:
    """Five A4 pages: a title, numbered headings, the symbol and Chinese paragraphs, the spec
    table (caption, a merged cell) on page 1; ``3.2 检查步骤`` on page 2; ``SPLIT_TABLE`` (one
    header row, ``repeatRows=1``) starting on page 3 and continued on page 4, text on page 5.
    ``HEADER`` / ``FOOTER`` on every page; ``INFO_KEYS`` and a Title in the document info."""
    from reportlab.lib.pagesizes import A4
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer

    s = _styles()
    story = [
        Paragraph(TITLE, s["title"]),
        Paragraph("1 Overview", s["h1"]),
        Paragraph(POWER, s["body"]),
        Paragraph(SYMBOLS, s["body"]),
        Paragraph(CHINESE, s["body"]),
        Paragraph(SPEC_CAPTION, s["caption"]),
        _table(SPEC_TABLE, spans=[((1, 5), (2, 5))]),
        Spacer(1, 8),
        Paragraph(AFTER_TABLE, s["body"]),
        PageBreak(),
        Paragraph(CHAPTER, s["h1cjk"]),
        Paragraph(SECTION, s["h2cjk"]),
        Paragraph(STEP_TEXT, s["body"]),
        PageBreak(),
        Paragraph("4 Fault codes", s["h1"]),
        Paragraph("The codes below are shown on the display.", s["body"]),
        Spacer(1, 300),
        Paragraph(SPLIT_CAPTION, s["caption"]),
        _table(SPLIT_TABLE, repeat=1),
        PageBreak(),
        Paragraph("5 Notes", s["h1"]),
        Paragraph("End of the manual.", s["body"]),
    ]

    def first(canvas: Any, doc: Any) -> None:
        set_info_keys(canvas, INFO_KEYS)
        _header_footer(canvas, doc)

    doc = SimpleDocTemplate(
        str(path), pagesize=A4, invariant=1, title=TITLE, author="Service Dept", topMargin=90
    )
    doc.build(story, onFirstPage=first, onLaterPages=_header_footer)
    return path


def long_pdf(path: Path, pages: int = 20) -> Path:
    """``pages`` pages of text and one ruled table each, with the running header and footer and
    no Title (the header is the title fallback)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    s = _styles()
    story: list[Any] = []
    for i in range(1, pages + 1):
        story += [
            Paragraph(f"{i} Section {i}", s["h1"]),
            Paragraph(SYMBOLS + " " + SYMBOLS, s["body"]),
            Paragraph(CHINESE, s["body"]),
            Paragraph(f"Table {i} Values", s["caption"]),
            _table(SPEC_TABLE[:5]),
            Paragraph(POWER, s["body"]),
            Paragraph(CHINESE + CHINESE, s["body"]),
        ]
        if i < pages:
            story.append(PageBreak())
    doc = SimpleDocTemplate(str(path), pagesize=A4, invariant=1, topMargin=90)
    doc.build(story, onFirstPage=_header_footer, onLaterPages=_header_footer)
    return path


def split_no_header_pdf(path: Path) -> Path:
    """``SPLIT_TABLE`` without a repeated header row (``repeatRows=0``) from the foot of page 1
    onto page 2, then on page 3 a different captioned table (``OTHER_TABLE``) that must stay a
    table of its own."""
    from reportlab.lib.pagesizes import A4
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer

    s = _styles()
    story = [
        Paragraph("Fault codes", s["title"]),
        Spacer(1, 380),
        _table(SPLIT_TABLE),
        PageBreak(),
        Paragraph(OTHER_CAPTION, s["caption"]),
        _table(OTHER_TABLE),
    ]
    SimpleDocTemplate(str(path), pagesize=A4, invariant=1, topMargin=90).build(story)
    return path


def scanned_page_image(dpi: int = 300) -> Any:
    """A4 page drawn with Pillow: ``SCAN_HEADING`` (16 pt), then in 11 pt ``SCAN_LINES``,
    ``SCAN_CHINESE``, the ruled ``SCAN_TABLE`` and ``SCAN_AFTER``."""
    from PIL import Image, ImageDraw, ImageFont

    w, h = round(8.27 * dpi), round(11.69 * dpi)
    img = Image.new("L", (w, h), 255)
    draw = ImageDraw.Draw(img)
    px = round(11 * dpi / 72)  # 11 pt
    sans = ImageFont.truetype(str(SANS_FONT), px)
    cjk = ImageFont.truetype(str(CJK_FONT), px)
    x, y = round(dpi), round(1.3 * dpi)
    draw.text((x, y), SCAN_HEADING, font=ImageFont.truetype(str(SANS_FONT), px * 16 // 11), fill=0)
    y += round(px * 2.5)
    for line in SCAN_LINES:
        draw.text((x, y), line, font=sans, fill=0)
        y += round(px * 1.5)
    y += px
    draw.text((x, y), SCAN_CHINESE, font=cjk, fill=0)
    y += round(px * 3)
    col_w, row_h = [round(1.6 * dpi), round(1.4 * dpi), round(1.4 * dpi)], round(px * 2)
    x_edges = [x]
    for cw in col_w:
        x_edges.append(x_edges[-1] + cw)
    for r, row in enumerate(SCAN_TABLE):
        top = y + r * row_h
        for c, cell in enumerate(row):
            draw.text((x_edges[c] + px // 2, top + px // 2), cell, font=sans, fill=0)
    line_w = max(2, round(dpi / 150))
    for r in range(len(SCAN_TABLE) + 1):
        draw.line((x_edges[0], y + r * row_h, x_edges[-1], y + r * row_h), fill=0, width=line_w)
    for xe in x_edges:
        draw.line((xe, y, xe, y + len(SCAN_TABLE) * row_h), fill=0, width=line_w)
    y += len(SCAN_TABLE) * row_h + px * 2
    draw.text((x, y), SCAN_AFTER, font=sans, fill=0)
    return img


def _image_page(canvas: Any, image: Any) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader

    canvas.drawImage(ImageReader(image), 0, 0, width=A4[0], height=A4[1])
    canvas.showPage()


def scanned_pdf(path: Path, with_text_pages: bool = True) -> Path:
    """Page 2 is ``scanned_page_image`` only (no text layer); pages 1 (with the letter-spaced
    ``SPACED_CHINESE``) and 3 have text layers (``with_text_pages=False``: the scan alone)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen.canvas import Canvas

    register_fonts()
    c = Canvas(str(path), pagesize=A4, invariant=1)
    if with_text_pages:
        c.setFont("WQY", 11)
        c.drawString(72, 760, "Page one has a text layer.")
        text = c.beginText(72, 700)
        text.setFont("WQY", 11)
        text.setCharSpace(3)  # gaps of 0.27 em between the characters: no spaces may appear
        text.textLine(SPACED_CHINESE)
        c.drawText(text)
        c.showPage()
    _image_page(c, scanned_page_image())
    if with_text_pages:
        c.setFont("WQY", 11)
        c.drawString(72, 760, "Page three has a text layer too.")
        c.showPage()
    c.save()
    return path


def blank_pages_pdf(path: Path, pages: int = 3) -> Path:
    """``pages`` pages without any text (a frame each): every one goes to OCR."""
    from reportlab.pdfgen.canvas import Canvas

    c = Canvas(str(path), invariant=1)
    for _ in range(pages):
        c.rect(72, 72, 100, 100)
        c.showPage()
    c.save()
    return path


def encrypted_pdf(path: Path, user_password: str = "user") -> Path:
    from reportlab.lib.pdfencrypt import StandardEncryption
    from reportlab.pdfgen.canvas import Canvas

    c = Canvas(str(path), invariant=1, encrypt=StandardEncryption(user_password, "owner"))
    c.drawString(72, 760, "Secret service data.")
    c.showPage()
    c.save()
    return path


def zero_page_pdf(path: Path) -> Path:
    """A well-formed PDF whose page tree is empty (``/Count 0``)."""
    from reportlab.pdfgen.canvas import Canvas

    Canvas(str(path), invariant=1).save()  # no showPage: no page
    return path


# a dense scanned page: ~45 lines with a ruled table, for OCR speed and accuracy
DENSE_SOURCE = "manuals/hx200-manual-v2.md"  # under scripts/sample_sources/
DENSE_FROM = "3 故障代码"  # the heading the page starts at (then as many blocks as fit)


def _sample_generator() -> Any:
    """scripts/make_sample_documents.py as a module (its fonts, wrapping and scan look)."""
    import importlib.util
    import sys

    name = "make_sample_documents"
    if name not in sys.modules:
        script = Path(__file__).resolve().parents[2] / "scripts" / "make_sample_documents.py"
        spec = importlib.util.spec_from_file_location(name, script)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
    return sys.modules[name]


def dense_scanned_page(max_lines: int = 45) -> tuple[Any, list[str], list[list[list[str]]]]:
    """A denser scan than the sample's (whose 10.5 pt lines are 1.6 apart): the sample
    generator's fonts, text wrapping, blur and noise, but 9.5 pt body text 1.4 lines apart, 9 pt
    table cells, headings 12 pt, from chapter 3 of the v2 manual's source (its fault-code table,
    3 x 7 cells, and the paragraphs and lists after it) until ``max_lines`` lines (table rows
    counted) or the page is full. No running header or footer (a single page has none to
    detect). Returns the 300 dpi greyscale image, the text lines drawn (headings, caption and
    body, in order) and the tables' rows."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter

    gen = _sample_generator()
    blocks = gen.read_source(gen.SOURCES / DENSE_SOURCE).blocks
    start = next(i for i, b in enumerate(blocks) if b.kind == "heading" and b.text == DENSE_FROM)
    img = Image.new("L", gen.A4_PX, 255)
    draw = ImageDraw.Draw(img)
    left, right = gen.px(20), gen.A4_PX[0] - gen.px(20)
    bottom = gen.A4_PX[1] - gen.px(20)
    body, head, cell = gen.MixedFont(9.5), gen.MixedFont(12), gen.MixedFont(9)
    step, cell_step, pad = round(body.size * 1.4), round(cell.size * 1.3), gen.px(1.5)
    lines: list[str] = []
    tables: list[list[list[str]]] = []
    y, n_lines = gen.px(20), 0
    for block in blocks[start:]:
        if block.kind == "table":
            rows = [[gen.plain(c) for c in r] for r in block.rows]
            widths = [0.13, 0.37, 0.50] if len(rows[0]) == 3 else [1 / len(rows[0])] * len(rows[0])
            xs = [left]
            for w in widths:
                xs.append(xs[-1] + round(w * (right - left)))
            xs[-1] = right
            wrapped = [
                [gen.wrap_px(c, cell, xs[k + 1] - xs[k] - 2 * pad) for k, c in enumerate(r)]
                for r in rows
            ]
            heights = [max(len(w) for w in row) * cell_step + 2 * pad for row in wrapped]
            if y + step + sum(heights) > bottom or n_lines + 1 + len(rows) > max_lines:
                break
            if block.caption:
                body.draw(draw, (gen.A4_PX[0] / 2, y), block.caption, align="center")
                lines.append(block.caption)
                n_lines += 1
                y += step
            top = y
            for row, h in zip(wrapped, heights):
                for k, cell_lines in enumerate(row):
                    for j, line in enumerate(cell_lines):
                        yy = y + pad + j * cell_step + round(cell.size * 0.1)
                        cell.draw(draw, (xs[k] + pad, yy), line)
                draw.line([(left, y), (right, y)], fill=0, width=3)
                y += h
            draw.line([(left, y), (right, y)], fill=0, width=3)
            for x in xs:
                draw.line([(x, top), (x, y)], fill=0, width=3)
            tables.append(rows)
            n_lines += len(rows)
            y += round(body.size * 0.6)
            continue
        if block.kind == "heading":
            todo, font = [gen.plain(block.text)], head
        elif block.kind in ("paragraph", "bullet", "number"):
            text = gen.plain(block.text) if block.kind == "paragraph" else gen.item_text(block)
            todo, font = gen.wrap_px(text, body, right - left), body
        else:
            continue
        line_step = round(font.size * 1.4)
        if y + len(todo) * line_step > bottom or n_lines + len(todo) > max_lines:
            break
        for line in todo:
            font.draw(draw, (left, y), line)
            lines.append(line)
            n_lines += 1
            y += line_step
        if block.kind == "heading":
            y += round(body.size * 0.4)
    img = img.filter(ImageFilter.GaussianBlur(gen.BLUR_RADIUS))
    noise = np.random.default_rng(gen.SEED).normal(0, gen.NOISE_SIGMA, (img.height, img.width))
    arr = np.clip(np.rint(np.asarray(img, dtype=np.float64) + noise), 0, 255)
    return Image.fromarray(arr.astype(np.uint8), mode="L"), lines, tables


def dense_scanned_pdf(path: Path) -> tuple[Path, list[str], list[list[list[str]]]]:
    """``dense_scanned_page`` as a one-page PDF (the image as a JPEG, quality 85, like the
    sample's scanned page); with the lines and tables drawn."""
    import io

    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen.canvas import Canvas

    image, lines, tables = dense_scanned_page()
    jpeg = io.BytesIO()
    image.save(jpeg, "JPEG", quality=85, dpi=(300, 300))
    canvas = Canvas(str(path), pagesize=A4, invariant=1)
    canvas.drawImage(ImageReader(io.BytesIO(jpeg.getvalue())), 0, 0, width=A4[0], height=A4[1])
    canvas.showPage()
    canvas.save()
    return path, lines, tables


# -- hostile scans (issue 32): a garbage text layer over a readable scan, a scanned table pasted
# into a digital page, a table scanned on its side

ALARM_LINES = [
    "Spindle overheating alarm E417",
    "Check the coolant pump and clean the fan filter.",
    "Reset the alarm once the spindle is below 40 C.",
    "Call service when E417 returns within one hour.",
]
ROTATED_TABLE = [
    ["Code", "Meaning", "Action"],
    ["E417", "Spindle hot", "Check coolant"],
    ["E102", "Oil hot", "Clean cooler"],
    ["E205", "Low pressure", "Check pump"],
]
PASTED_TABLE = [
    ["Part", "Interval", "Torque"],
    ["Filter", "500 h", "25 Nm"],
    ["Seal", "1000 h", "40 Nm"],
]
DIGITAL_TEXT = [
    "Maintenance of the HX-200 spindle unit",
    "The table below was scanned from the supplier's sheet and pasted into this manual.",
    "Replace the parts at the intervals given and tighten them to the torque listed.",
]


def _lines_image(lines: Sequence[str], dpi: int = 300, size_pt: float = 14) -> Any:
    """A4 at ``dpi``, ``lines`` in DejaVu Sans at ``size_pt`` from 1 in from the top-left."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("L", (round(8.27 * dpi), round(11.69 * dpi)), 255)
    draw = ImageDraw.Draw(img)
    px = round(size_pt * dpi / 72)
    font = ImageFont.truetype(str(SANS_FONT), px)
    for i, line in enumerate(lines):
        draw.text((dpi, dpi + round(i * px * 1.8)), line, font=font, fill=0)
    return img


def ruled_table_image(rows: Sequence[Sequence[str]], dpi: int = 300, size_pt: float = 12) -> Any:
    """A ruled table on white (just the table and a margin), cells in DejaVu Sans."""
    from PIL import Image, ImageDraw, ImageFont

    px = round(size_pt * dpi / 72)
    font = ImageFont.truetype(str(SANS_FONT), px)
    col_w = [max(round(font.getlength(r[c])) for r in rows) + 2 * px for c in range(len(rows[0]))]
    row_h, margin = round(px * 2.2), px
    w, h = sum(col_w) + 2 * margin, row_h * len(rows) + 2 * margin
    img = Image.new("L", (w, h), 255)
    draw = ImageDraw.Draw(img)
    xs = [margin]
    for cw in col_w:
        xs.append(xs[-1] + cw)
    line_w = max(2, round(dpi / 150))
    for r, row in enumerate(rows):
        top = margin + r * row_h
        for c, cell in enumerate(row):
            draw.text((xs[c] + px, top + round(px * 0.55)), cell, font=font, fill=0)
    for r in range(len(rows) + 1):
        y = margin + r * row_h
        draw.line((xs[0], y, xs[-1], y), fill=0, width=line_w)
    for x in xs:
        draw.line((x, margin, x, margin + len(rows) * row_h), fill=0, width=line_w)
    return img


def garbage_layer_scan_pdf(path: Path, seed: int = 32) -> tuple[Path, str]:
    """A 300 dpi scan of ``ALARM_LINES`` under an invisible (render mode 3) text layer of random
    glyphs, one run per scanned line, as a broken OCR step leaves it. Returns the path and the
    layer's text."""
    import random

    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen.canvas import Canvas

    rng = random.Random(seed)
    glyphs = [chr(c) for c in range(33, 127)]
    c = Canvas(str(path), pagesize=A4, invariant=1)
    c.drawImage(ImageReader(_lines_image(ALARM_LINES)), 0, 0, width=A4[0], height=A4[1])
    layer = []
    for i in range(len(ALARM_LINES) * 6):  # the layer covers the page, not just the four lines
        words = [
            "".join(rng.choice(glyphs) for _ in range(rng.randint(2, 9)))
            for _ in range(rng.randint(8, 12))
        ]
        text = c.beginText(72, A4[1] - 72 - 12 - i * 24)
        text.setTextRenderMode(3)  # invisible: neither filled nor stroked
        text.setFont("Helvetica", 12)
        text.textLine(" ".join(words))
        c.drawText(text)
        layer.append(" ".join(words))
    c.showPage()
    c.save()
    return path, "\n".join(layer)


def pasted_scan_pdf(path: Path) -> Path:
    """A digital page (``DIGITAL_TEXT`` as a text layer) with ``PASTED_TABLE`` pasted in as a
    300 dpi image (no text over it) below the text."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen.canvas import Canvas

    register_fonts()
    c = Canvas(str(path), pagesize=A4, invariant=1)
    c.setFont("WQY", 15)
    c.drawString(72, A4[1] - 90, DIGITAL_TEXT[0])
    c.setFont("WQY", 10.5)
    for i, line in enumerate(DIGITAL_TEXT[1:]):
        c.drawString(72, A4[1] - 120 - i * 15, line)
    table = ruled_table_image(PASTED_TABLE)
    w, h = table.width * 72 / 300, table.height * 72 / 300
    c.drawImage(ImageReader(table), 72, A4[1] - 170 - h, width=w, height=h)
    c.setFont("WQY", 10.5)
    c.drawString(72, A4[1] - 190 - h, "Check the seal after the first 100 hours.")
    c.showPage()
    c.save()
    return path


def rotated_table_scan_pdf(path: Path, angle: int = 90, rows: Sequence[Sequence[str]] = ()) -> Path:
    """An image-only A4 page (300 dpi) holding a ruled table (``ROTATED_TABLE``) turned by
    ``angle`` degrees counter-clockwise (0: upright)."""
    from PIL import Image
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen.canvas import Canvas

    table = ruled_table_image(rows or ROTATED_TABLE).rotate(angle, expand=True, fillcolor=255)
    page = Image.new("L", (round(8.27 * 300), round(11.69 * 300)), 255)
    page.paste(table, (300, 450))
    c = Canvas(str(path), pagesize=A4, invariant=1)
    c.drawImage(ImageReader(page), 0, 0, width=A4[0], height=A4[1])
    c.showPage()
    c.save()
    return path
