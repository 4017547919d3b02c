"""The layout of a read PDF: running headers and footers taken out, headings found by size,
weight and numbering, lines joined into paragraphs by their gaps, tables split across pages
joined. Works on the pages ``rag_lab.parser.pdf`` read (text layer or OCR), whatever read them.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_lab.parser import _ocr

# how a page was read
TEXT, OCR, SKIPPED = "text", "ocr", "skipped"

_CAPTION = re.compile(r"^(?:table|tab\.|表)\s*[\dA-Z][\w.\-–]*", re.I)
_NUMBERED = re.compile(r"^(\d{1,3}(?:\.\d{1,3})*)\.?(?=\s|[^\x00-\x7f]|$)")
_LIST_ITEM = re.compile(r"^(?:[•●○■□◆▪\-–*]\s|\(?\d{1,2}[.)、]\s|（\d{1,2}）|[a-z]\)\s)")
_SENTENCE_END = tuple(".。!！?？:：;；")
_ROMAN = re.compile(r"^[\-–—]?[ivxlc]{1,7}[\-–—]?$")
_EDGE_PUNCT = " \t-–—|·•,，;；:"
# running headers/footers: what a page number looks like (stripped from the metadata copy)
_PAGE_NUMBER = re.compile(
    r"第\s*\d+\s*页(?:\s*[,，/]?\s*共\s*\d+\s*页)?|共\s*\d+\s*页"
    r"|\bpage\s+\d+(?:\s*(?:of|/)\s*\d+)?\b"
    r"|^[\s\-–—|·]*\d+(?:\s*(?:/|of)\s*\d+)?[\s\-–—|·]*$",
    re.I,
)


@dataclass
class Line:
    """A line of text on a page; coordinates in PDF points from the page's top-left corner."""

    text: str
    top: float
    bottom: float
    x0: float
    x1: float
    size: float
    bold: bool = False
    font: str = ""
    par_start: bool | None = None  # OCR: Tesseract's paragraph start; None: decide by geometry
    role: str = "body"  # body | heading | caption | running (header/footer)
    level: int = 0
    ocr: bool = False  # read by OCR from an image on a text-layer page (no font size, no headings)


@dataclass
class Table:
    rows: list[list[str]]
    top: float
    bottom: float
    x_edges: tuple[float, ...]
    pages: list[int]
    caption: str | None = None


@dataclass
class Page:
    number: int
    width: float
    height: float
    kind: str
    lines: list[Line] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    confidence: float | None = None
    blocks: list[Any] = field(default_factory=list)  # Line (heading) | list[Line] | Table
    readable: float | None = None  # the text layer's readable share (``_layer_quality``)
    garbled: bool = False  # the text layer was judged unreadable (then OCR'd when OCR is on)
    ocr_images: int = 0  # images on a text-layer page read by OCR
    rotated: int = 0  # the page or images on it read after turning them upright
    weak_tables: int = 0  # OCR tables too weakly read to be tables (their text kept as lines)


# ---------------------------------------------------------------- running headers and footers


def running_key(text: str) -> str:
    """What a running line is compared by: no spaces, digits and a lone lower-case roman page
    number (``iv``) as ``0``, case folded."""
    key = "".join(text.split())
    if _ROMAN.match(key):
        return "0"
    return re.sub(r"\d+", "0", key).casefold()


def strip_page_numbers(first: str, second: str | None) -> str:
    """A running line without its page number: ``内部资料 第 3 页`` → ``内部资料``; a number that
    changes between two occurrences (``Manual 3`` / ``Manual 4``) is one too, and so is a lone
    lower-case roman numeral (``iv``)."""
    if _ROMAN.match("".join(first.split())):
        return ""
    text = _PAGE_NUMBER.sub(" ", first)
    if second is not None:
        a, b = text.split(), _PAGE_NUMBER.sub(" ", second).split()
        if len(a) == len(b):
            text = " ".join(x for x, y in zip(a, b) if not (x.isdigit() and x != y))
    return " ".join(text.split()).strip(_EDGE_PUNCT)


# ---------------------------------------------------------------- the layout


@dataclass(frozen=True)
class PdfLayout:
    """Lays out read pages (``PdfParser``'s settings of the same names, checked there)."""

    header_footer_margin: float = 0.1
    header_footer_min_fraction: float = 0.5
    heading_size_ratio: float = 1.15
    max_heading_chars: int = 80

    def arrange(self, pages: list[Page]) -> tuple[list[str], list[str]]:
        """Mark running lines, headings and captions, group each page's lines into blocks
        (``page.blocks``) and join tables split across pages; the running headers and footers'
        texts, for the document's metadata."""
        headers, footers = self._remove_running(pages)
        self._headings(pages)
        gap_ratio = self._line_gap_ratio(pages)
        for p in pages:
            p.blocks = self._blocks(p, gap_ratio)
        self._join_split_tables(pages)
        return headers, footers

    def _remove_running(self, pages: list[Page]) -> tuple[list[str], list[str]]:
        """Mark running header/footer lines (``role = "running"``); their texts for metadata."""
        read = [p for p in pages if p.kind != SKIPPED and p.lines]
        if self.header_footer_margin <= 0 or len(read) < 2:
            return [], []
        need = max(2, math.ceil(self.header_footer_min_fraction * len(read) - 1e-9))
        where: dict[tuple[str, str], list[Line]] = {}
        for p in read:
            zone = self.header_footer_margin * p.height
            seen: set[tuple[str, str]] = set()
            for line in p.lines:
                mid = (line.top + line.bottom) / 2
                place = "header" if mid < zone else "footer" if mid > p.height - zone else ""
                if not place:
                    continue
                key = (place, running_key(line.text))
                if key not in seen:
                    seen.add(key)
                    where.setdefault(key, []).append(line)
        headers: list[str] = []
        footers: list[str] = []
        running_keys = {k for k, lines in where.items() if len(lines) >= need}
        self._remove_running_ocr(read, running_keys)
        for (place, _), lines in where.items():
            if len(lines) < need:
                continue
            for line in lines:
                line.role = "running"
            text = strip_page_numbers(lines[0].text, lines[1].text if len(lines) > 1 else None)
            target = headers if place == "header" else footers
            if text and text not in target:
                target.append(text)
        return headers, footers

    def _remove_running_ocr(self, pages: Sequence[Page], running: set[tuple[str, str]]) -> None:
        """On OCR'd pages the running header/footer is read, not copied: a margin line close to
        a running line of the text pages (edit similarity >= 80% after ``running_key``) is one
        too, so a scanned page does not put "内部资料 ' 请勿外传第 6 页" into the body."""
        from rapidfuzz import fuzz

        for p in pages:
            if p.kind != OCR:
                continue
            zone = self.header_footer_margin * p.height
            for line in p.lines:
                mid = (line.top + line.bottom) / 2
                place = "header" if mid < zone else "footer" if mid > p.height - zone else ""
                if not place or line.role == "running":
                    continue
                key = running_key(line.text)
                if any(pl == place and fuzz.ratio(key, rk) >= 80 for pl, rk in running):
                    line.role = "running"

    @staticmethod
    def _body_size(pages: Sequence[Page]) -> tuple[float, bool]:
        """Median font size over the body characters of text-layer pages, and whether most of
        the body is bold."""
        sizes: Counter[float] = Counter()
        bold = 0
        total = 0
        for p in pages:
            if p.kind != TEXT:
                continue
            for line in p.lines:
                if line.role == "running" or line.ocr:
                    continue
                n = len(line.text.replace(" ", ""))
                sizes[round(line.size, 1)] += n
                total += n
                bold += n if line.bold else 0
        if not total:
            return 0.0, False
        half, acc = total / 2, 0
        for size in sorted(sizes):
            acc += sizes[size]
            if acc >= half:
                return size, bold > half
        return max(sizes), bold > half

    def _find_captions(self, page: Page, body_size: float) -> None:
        """A table's caption: the line just above it (``Table 2 ...``, ``表 2 ...`` or a short,
        unnumbered bold line at body size), else a ``Table``/``表`` line just below it."""
        body = [ln for ln in page.lines if ln.role == "body"]
        for t in page.tables:
            above = [
                ln for ln in body if ln.bottom <= t.top + 1 and t.top - ln.bottom < 2.5 * ln.size
            ]
            below = [
                ln for ln in body if ln.top >= t.bottom - 1 and ln.top - t.bottom < 2 * ln.size
            ]
            cand = max(above, key=lambda ln: ln.bottom, default=None)
            if cand is not None and (
                _CAPTION.match(cand.text)
                or (
                    cand.bold
                    and len(cand.text) <= 60
                    and not _NUMBERED.match(cand.text)
                    and (not body_size or cand.size < self.heading_size_ratio * body_size)
                )
            ):
                cand.role, t.caption = "caption", cand.text
                continue
            cand = min(below, key=lambda ln: ln.top, default=None)
            if cand is not None and _CAPTION.match(cand.text):
                cand.role, t.caption = "caption", cand.text

    def _is_heading(self, line: Line, body_size: float, body_font: str, body_bold: bool) -> bool:
        if len(line.text) > self.max_heading_chars or not re.search(r"[^\W\d_]", line.text):
            return False
        if not body_size:
            return False
        if line.size >= self.heading_size_ratio * body_size:
            return True
        if line.bold and not body_bold:
            return True
        # a section number makes a somewhat larger line a heading (12 pt in a 10.5 pt body)
        if _NUMBERED.match(line.text) and line.size >= 1.08 * body_size:
            return True
        return line.font != body_font and line.size >= 1.05 * body_size

    def _headings(self, pages: Sequence[Page]) -> float:
        """Mark headings and their levels; returns the body size."""
        body_size, body_bold = self._body_size(pages)
        fonts: Counter[str] = Counter()
        for p in pages:
            for ln in p.lines:
                if p.kind == TEXT and ln.role == "body" and not ln.ocr:
                    fonts[ln.font] += len(ln.text)
        body_font = fonts.most_common(1)[0][0] if fonts else ""
        for p in pages:
            self._find_captions(p, body_size)
        heads: list[Line] = []
        for p in pages:
            if p.kind == TEXT:
                for ln in p.lines:
                    if ln.ocr:
                        continue  # no font size or weight to judge a heading by
                    if ln.role == "body" and self._is_heading(ln, body_size, body_font, body_bold):
                        ln.role = "heading"
                        heads.append(ln)
            elif p.kind == OCR:
                self._ocr_headings(p)
        sizes = sorted({round(h.size * 2) / 2 for h in heads}, reverse=True)
        numbered: dict[float, Counter[int]] = {}
        for h in heads:
            m = _NUMBERED.match(h.text)
            if m:
                h.level = 1 + len(m.group(1).split("."))
                numbered.setdefault(round(h.size * 2) / 2, Counter())[h.level] += 1
        for h in heads:
            if h.level:
                continue
            size = round(h.size * 2) / 2
            if size == sizes[0]:
                h.level = 1
            elif size in numbered:
                h.level = numbered[size].most_common(1)[0][0]
            else:
                h.level = 1 + sizes.index(size)
            h.level = min(h.level, 6)
        for h in heads:
            h.level = min(max(h.level, 1), 6)
        return body_size

    def _ocr_headings(self, page: Page) -> None:
        body = [ln for ln in page.lines if ln.role == "body"]
        if len(body) < 3:
            return
        sizes = sorted(ln.size for ln in body)
        median = sizes[len(sizes) // 2]
        for i, ln in enumerate(body):
            alone = ln.par_start and (i + 1 == len(body) or body[i + 1].par_start)
            if (
                alone
                and ln.size >= 1.3 * median
                and len(ln.text) <= self.max_heading_chars
                and re.search(r"[^\W\d_]", ln.text)
            ):
                m = _NUMBERED.match(ln.text)
                ln.role, ln.level = "heading", 1 + len(m.group(1).split(".")) if m else 2

    @staticmethod
    def _line_gap_ratio(pages: Sequence[Page]) -> float:
        """The gap between lines of one paragraph, as a fraction of the font size: the most
        common gap between consecutive body lines of one size, among gaps up to 0.7 of the size
        (paragraph spacing is usually larger, and most paragraphs may be single lines, so the
        gaps above are left out); ties go to the smaller gap."""
        ratios: Counter[float] = Counter()
        for p in pages:
            if p.kind != TEXT:
                continue
            body = [ln for ln in p.lines if ln.role == "body" and not ln.ocr]
            for a, b in zip(body, body[1:]):
                if abs(a.size - b.size) <= 0.05 * a.size:
                    r = (b.top - a.bottom) / a.size
                    if -0.1 <= r <= 0.7:
                        ratios[round(r * 20) / 20] += 1
        if not ratios:
            return 0.25
        return min(ratios, key=lambda r: (-ratios[r], r))

    @staticmethod
    def _continues(prev: Line, line: Line, gap_ratio: float, left: float, right: float) -> bool:
        """Whether ``line`` continues the paragraph whose last line is ``prev``."""
        if line.par_start is not None:
            return not line.par_start
        if abs(line.size - prev.size) > 0.1 * prev.size or line.top < prev.top:
            return False
        if line.top - prev.bottom > (gap_ratio + 0.3) * prev.size:
            return False
        if _LIST_ITEM.match(line.text):
            return False
        # a short line ending a sentence ends its paragraph (paragraphs without spacing)
        short = prev.x1 < right - 0.2 * max(right - left, 1.0)
        return not (short and prev.text.endswith(_SENTENCE_END))

    def _blocks(self, page: Page, gap_ratio: float) -> list[Any]:
        """The page's headings, paragraphs (lists of lines) and tables in reading order: top to
        bottom on a text-layer page; on an OCR'd page Tesseract's order of paragraphs (which
        follows columns), each table placed before the first paragraph starting below it."""
        body = [ln for ln in page.lines if ln.role in ("body", "heading")]
        left = min((ln.x0 for ln in body), default=0.0)
        right = max((ln.x1 for ln in body), default=0.0)
        items: list[Line | Table]
        if page.kind == OCR:
            tables = sorted(page.tables, key=lambda t: t.top)
            items = []
            for ln in body:
                while tables and ln.par_start and tables[0].top < ln.top:
                    items.append(tables.pop(0))
                items.append(ln)
            items += tables
        else:
            keyed: list[tuple[float, int, Line | Table]] = [(ln.top, 1, ln) for ln in body]
            keyed += [(t.top, 0, t) for t in page.tables]
            keyed.sort(key=lambda it: (it[0], it[1]))
            items = [obj for _, _, obj in keyed]
        blocks: list[Any] = []
        for obj in items:
            if isinstance(obj, Table):
                blocks.append(obj)
            elif obj.role == "heading":
                last = blocks[-1] if blocks else None
                if (
                    isinstance(last, Line)
                    and abs(last.size - obj.size) < 0.05 * obj.size
                    and last.bold == obj.bold
                    and obj.top - last.bottom < 0.6 * obj.size
                    and not _NUMBERED.match(obj.text)
                ):  # a heading wrapped over two lines
                    last.text = _ocr.join_lines([last.text, obj.text])
                    last.bottom = obj.bottom
                else:
                    blocks.append(obj)
            else:
                last = blocks[-1] if blocks else None
                if isinstance(last, list) and self._continues(
                    last[-1], obj, gap_ratio, left, right
                ):
                    last.append(obj)
                else:
                    blocks.append([obj])
        return blocks

    @staticmethod
    def _join_split_tables(pages: Sequence[Page]) -> None:
        """A table that ends page n and one that starts page n + 1 become one table when the
        second repeats the first's header row (dropped), or has the same column edges and no
        caption while the first reaches the bottom part of its page and the second starts in the
        top part. A table filling a whole page can go on over the next one too."""
        open_: tuple[Page, Table] | None = None  # the table ending the previous page
        for p in pages:
            if open_ is not None and open_[0].number + 1 == p.number and p.blocks:
                last_page, t = open_
                u = p.blocks[0]
                if isinstance(u, Table) and t.rows and u.rows:
                    same_cols = len(t.x_edges) == len(u.x_edges) and all(
                        abs(a - b) <= 2 for a, b in zip(t.x_edges, u.x_edges)
                    )
                    joined = True
                    if u.rows[0] == t.rows[0]:
                        t.rows.extend(u.rows[1:])
                    elif (
                        same_cols
                        and u.caption is None
                        and t.bottom >= 0.7 * last_page.height
                        and u.top <= 0.3 * p.height
                    ):
                        t.rows.extend(u.rows)
                    else:
                        joined = False
                    if joined:
                        t.pages.extend(n for n in u.pages if n not in t.pages)
                        t.bottom = u.bottom
                        p.blocks.pop(0)
                        if not p.blocks:
                            open_ = (p, t)
                            continue
            last = p.blocks[-1] if p.blocks else None
            open_ = (p, last) if isinstance(last, Table) else None
