"""HTML pages (exported manuals, help-centre and wiki pages): the main text as Markdown, with
headings as sections and tables as tables; navigation, headers, footers, sidebars and cookie
banners left out (trafilatura, a library built for that, picks the main content)."""

from __future__ import annotations

import codecs
import logging
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.errors import DataError
from rag_lab.parser._builder import DocumentBuilder
from rag_lab.parser._records import CONTRACT_DATES, iso_date, source_of, split_list
from rag_lab.parser.base import relative_id
from rag_lab.types import Document
from rag_lab.validate import OptionError, boolean

if TYPE_CHECKING:
    from lxml.etree import _Element

log = logging.getLogger(__name__)

META_FIELDS = (
    "doc_id",
    "version",
    "valid_from",
    "valid_to",
    "source_type",
    "doc_type",
    "language",
    "entities",
)
_LIST_FIELDS = ("entities",)
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_XML_DECL = re.compile(r"\A\s*<\?xml[^>]*\?>")
# characters XML cannot hold: lxml refuses a string with them (binary junk, NUL padding)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_HEADING_REND = re.compile(r"^h([1-6])$")
# trafilatura's block elements: text on either side of one is not the same line
_BLOCKS = frozenset({"p", "head", "list", "item", "quote", "table", "row", "cell", "code", "div"})
_MAX_SPAN = 100  # as trafilatura: a colspan="100000" must not blow a table up
# libxml2's HTML parser keeps elements up to this depth and drops what lies deeper (lxml's
# huge_tree would raise it to 2048, but trafilatura parses the page again without it)
_MAX_DEPTH = 256


def _squash(text: str) -> str:
    return " ".join(text.split())


def _no_text(path: Path, why: str) -> DataError:
    return DataError(f"{path}: no main text found in the HTML ({why})")


def _why_empty(cut_at: int | None, otherwise: str) -> str:
    if cut_at is None:
        return otherwise
    return (
        f"elements nested deeper than {_MAX_DEPTH} levels from line {cut_at}: the HTML parser's "
        "nesting limit was hit and the text below that depth is not read"
    )


def _depth_limit(parser: Any) -> int | None:
    """The line where libxml2's nesting limit (256 elements deep) cut the page off, when it did:
    everything below that depth is dropped from the tree, so a page whose text sits deeper has
    no text left for the extractor."""
    for entry in parser.error_log:
        if "Excessive depth" in entry.message:
            return int(entry.line or 0)
    return None


class HtmlParser:
    """Args:
    favor_precision: trafilatura's precision mode: less text when unsure what is main content
        (a page of navigation only is refused instead of yielding its menu as text).
    meta_fields: ``<meta name="..." content="...">`` names kept as metadata (the metadata
        contract's fields); ``doc_id`` sets the document id, ``entities`` is split on ``,``
        and ``;`` into a list, ``valid_from`` / ``valid_to`` must be ISO dates.
    meta_prefix: a prefix the names carry (``rag:`` reads ``<meta name="rag:doc_id">``);
        ``""`` reads the plain names.

    One document per file, written as Markdown: headings (``h1``-``h6``) open sections whose
    path is the heading trail, each table is a section of its own (merged cells repeat their
    text in every cell they span, a table nested in a cell becomes that cell's text,
    ``<caption>`` becomes the table's caption), lists become ``- item`` lines. The title is
    ``og:title``, else ``<title>``, else the first heading, else the file name; ``language``
    falls back to ``<html lang>``; the id is ``doc_id`` from the meta tags, else the path
    relative to the corpus root. Text is read as UTF-8, else in the ``<meta charset>`` the page
    declares. Broken markup (unclosed or truncated tags) is read leniently; a page with no main
    text (only navigation, binary junk, an undeclared non-UTF-8 encoding) is a ``DataError``.
    """

    suffixes = (".html", ".htm")

    def __init__(
        self,
        favor_precision: bool = True,
        meta_fields: Sequence[str] = META_FIELDS,
        meta_prefix: str = "",
    ) -> None:
        self.favor_precision = boolean(favor_precision, "favor_precision")
        if isinstance(meta_fields, str):
            raise OptionError("meta_fields", meta_fields, "must be a list of meta tag names")
        if not isinstance(meta_prefix, str):
            raise OptionError("meta_prefix", meta_prefix, "must be a string")
        self.meta_fields = tuple(str(f) for f in meta_fields)
        self.meta_prefix = meta_prefix

    def parse(self, path: Path, root: Path) -> Iterator[Document]:
        import trafilatura
        from lxml import etree
        from lxml import html as lxml_html

        page = _CONTROL.sub("", _XML_DECL.sub("", _decode(path)))
        if not page.strip():
            raise _no_text(path, "the file is empty")
        try:
            parser = lxml_html.HTMLParser(remove_comments=True, remove_pis=True)
            tree = lxml_html.document_fromstring(page, parser=parser)
        except (etree.ParserError, ValueError):
            raise _no_text(path, "not readable as HTML") from None
        cut_at = _depth_limit(parser)
        # scripts and styles are never text (trafilatura drops them too); dropped here so the
        # table captions below are matched on what trafilatura keeps
        etree.strip_elements(tree, "script", "style", "template", with_tail=False)
        title, meta = self._meta(tree, path)
        page_h1 = _page_h1(tree)
        # HTML5 landmarks that are page furniture by definition go before trafilatura sees the
        # page (an article's own <header>, with its title, stays): on a short page its fallback
        # extractors would otherwise return the menu
        for el in tree.xpath(
            "//nav | //footer | //aside | //header[not(ancestor::article or ancestor::main)]"
            " | //*[@role='navigation' or @role='banner' or @role='contentinfo'"
            " or @role='complementary']"
        ):
            if el.getparent() is not None:
                el.drop_tree()
        captions = _normalise_tables(tree)
        try:
            xml = trafilatura.extract(
                lxml_html.tostring(tree, encoding="unicode"),
                output_format="xml",
                include_tables=True,
                include_formatting=False,
                include_comments=False,
                include_images=False,
                include_links=False,
                favor_precision=self.favor_precision,
                # the title and meta tags are read above; trafilatura's metadata pass (htmldate
                # guesses a date even from a "© 2024" footer) would only cost time
                with_metadata=False,
            )
        except (ValueError, TypeError, RecursionError, etree.LxmlError) as exc:
            raise _no_text(path, f"extraction failed: {_squash(str(exc))}") from None
        if not xml:
            raise _no_text(path, _why_empty(cut_at, "nothing but boilerplate, or not HTML"))
        main = etree.fromstring(xml.encode("utf-8")).find("main")
        builder = DocumentBuilder()
        if main is not None and page_h1 and not _has_h1(main):
            # trafilatura leaves out an h1 that sits in the page's <header> (above <main>):
            # the page's one h1 is its topic, so it heads the sections
            builder.heading(1, page_h1)
        first_heading = _walk(main, builder, captions) if main is not None else ""
        doc_id = str(meta.pop("doc_id", None) or relative_id(path, root))
        meta["source"] = source_of(path, root)
        doc = builder.build(doc_id, title or first_heading or path.stem, meta)
        if not doc.text.strip():
            raise _no_text(path, _why_empty(cut_at, "nothing but boilerplate"))
        if cut_at is not None:  # some text was read: the rest is lost, say so
            log.warning("%s: %s", path, _why_empty(cut_at, ""))
        yield doc

    def _meta(self, tree: _Element, path: Path) -> tuple[str, dict[str, Any]]:
        """``(title, metadata)`` from the ``<head>``: ``og:title`` / ``<title>``, the
        ``meta_fields`` meta tags, ``<html lang>``."""
        wanted = {f"{self.meta_prefix}{f}".lower(): f for f in self.meta_fields}
        meta: dict[str, Any] = {}
        og_title = ""
        for el in tree.iter("meta"):
            name = (el.get("name") or el.get("property") or "").strip().lower()
            content = _squash(el.get("content") or "")
            if not content:
                continue
            if name == "og:title" and not og_title:
                og_title = content
            field = wanted.get(name)
            if field and field not in meta:
                meta[field] = content
        for key in _LIST_FIELDS:
            if isinstance(meta.get(key), str):
                meta[key] = split_list(meta[key])
        for key in CONTRACT_DATES:
            if key in meta:
                meta[key] = iso_date(meta[key], str(path), key)
        if "language" in wanted.values() and not meta.get("language"):
            lang = _squash(tree.get("lang") or tree.get("xml:lang") or "")
            if lang:
                meta["language"] = lang
        title_el = tree.find(".//title")
        page_title = _cell_text(title_el) if title_el is not None else ""
        title = str(meta.pop("title", "") or og_title or page_title)
        return title, meta


def _page_h1(tree: _Element) -> str:
    """The text of the page's only ``<h1>`` outside navigation, footers and sidebars; ``""``
    when there is none or more than one (then none of them names the page)."""
    boiler = {"nav", "footer", "aside"}
    h1s = [h for h in tree.iter("h1") if not any(a.tag in boiler for a in h.iterancestors())]
    return _cell_text(h1s[0]) if len(h1s) == 1 else ""


def _has_h1(main: _Element) -> bool:
    return any(el.get("rend") == "h1" for el in main.iter("head"))


def _decode(path: Path) -> str:
    """The page's text: UTF-8 (a BOM accepted), a UTF-16 file with its BOM, else the
    ``<meta charset>`` the page declares."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError:
            raise _no_text(path, "not UTF-16 text despite its byte-order mark") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        utf8_error = exc
    m = _CHARSET.search(raw[:4096])
    if not m:
        raise _no_text(
            path,
            f"not UTF-8 (byte 0x{raw[utf8_error.start]:02x}) and no <meta charset> declared",
        )
    charset = m.group(1).decode("ascii", "replace")
    try:
        return raw.decode(charset)
    except LookupError:
        raise _no_text(path, f"unknown charset {charset!r} declared") from None
    except UnicodeDecodeError as exc:
        raise _no_text(
            path, f"not {charset} text (byte 0x{raw[exc.start]:02x}) though it declares it"
        ) from None


# --- tables in the source page -------------------------------------------------------------------


def _cell_text(el: _Element) -> str:
    return _squash("".join(el.itertext()))


def _span(cell: _Element, attr: str) -> int:
    value = (cell.get(attr) or "1").strip()
    return min(int(value), _MAX_SPAN) if value.isdecimal() else 1


def _signature(cells: Sequence[str]) -> str:
    """A table's first non-empty row, whitespace removed: what ties a table trafilatura kept to
    the source table (trafilatura keeps no ids)."""
    return "".join("".join(c.split()) for c in cells)


def _normalise_tables(tree: _Element) -> dict[str, list[str]]:
    """Rewrites the page's tables before trafilatura sees them, which would otherwise leave the
    extra grid cells of a merged cell empty and move a nested table out of its cell: a table
    inside a cell becomes that cell's text (``a, b; c, d``: cells, rows), and a cell spanning
    columns or rows is repeated in every grid cell it covers. ``<caption>`` elements are taken
    out; returned as first-row signature → captions, in page order."""
    from lxml import etree

    for table in reversed(list(tree.iter("table"))):  # innermost first
        if any(a.tag in ("td", "th") for a in table.iterancestors()):
            rows = [
                ", ".join(t for t in (_cell_text(c) for c in tr if c.tag in ("td", "th")) if t)
                for tr in table.iter("tr")
            ]
            flat = etree.Element("span")
            flat.text = f" {'; '.join(r for r in rows if r)} "
            flat.tail = table.tail
            parent = table.getparent()
            if parent is not None:
                parent.replace(table, flat)
    captions: dict[str, list[str]] = {}
    for table in tree.iter("table"):
        caption = next((c for c in table if c.tag == "caption"), None)
        caption_text = _cell_text(caption) if caption is not None else ""
        if caption is not None:
            table.remove(caption)
        first = _expand_spans(table)
        if caption_text and first:
            captions.setdefault(_signature(first), []).append(caption_text)
    return captions


def _expand_spans(table: _Element) -> list[str]:
    """Repeats spanning cells over the grid (see ``_normalise_tables``); returns the texts of
    the first row that has any."""
    from lxml import etree

    rows = list(table.iter("tr"))
    carry: dict[int, list[Any]] = {}  # column → [rows still covered, source cell]
    first: list[str] = []

    def copy_of(cell: _Element) -> _Element:
        new = etree.Element(cell.tag)
        new.text = _cell_text(cell)
        return new

    def flush(out: list[_Element], col: int, trailing: bool) -> int:
        while col in carry or (trailing and any(c >= col for c in carry)):
            if col in carry:
                out.append(copy_of(carry[col][1]))
                carry[col][0] -= 1
                if carry[col][0] <= 0:
                    del carry[col]
            else:
                out.append(etree.Element("td"))
            col += 1
        return col

    for i, tr in enumerate(rows):
        cells = [c for c in tr if c.tag in ("td", "th")]
        spans = any(_span(c, "colspan") > 1 or _span(c, "rowspan") != 1 for c in cells)
        if not spans and not carry:
            if not first and any(_cell_text(c) for c in cells):
                first = [_cell_text(c) for c in cells]
            continue
        out: list[_Element] = []
        col = 0
        for cell in cells:
            col = flush(out, col, trailing=False)
            colspan, rowspan = _span(cell, "colspan"), _span(cell, "rowspan")
            if rowspan == 0:  # HTML: to the end of the table
                rowspan = len(rows) - i
            rowspan = min(rowspan, len(rows) - i)
            for attr in ("colspan", "rowspan"):
                cell.attrib.pop(attr, None)
            out.append(cell)
            out.extend(copy_of(cell) for _ in range(colspan - 1))
            if rowspan > 1:
                for k in range(colspan):
                    carry[col + k] = [rowspan - 1, cell]
            col += colspan
        flush(out, col, trailing=True)
        tr[:] = out
        if not first and any(_cell_text(c) for c in out):
            first = [_cell_text(c) for c in out]
    return first


# --- trafilatura's XML → blocks ------------------------------------------------------------------


def _inline(el: _Element, skip: tuple[str, ...] = ()) -> str:
    """The element's text with ``<lb/>`` as line breaks, inner spaces squashed per line;
    children tagged ``skip`` (a nested list) left out."""
    parts: list[str] = [el.text or ""]
    for child in el:
        if child.tag == "lb":
            parts.append("\n")
        elif child.tag in _BLOCKS and child.tag not in skip:  # <quote><p>a</p><p>b</p></quote>
            parts.append(f"\n{_inline(child, skip)}\n")
        elif child.tag not in skip:
            parts.append(_inline(child, skip))
        parts.append(child.tail or "")
    lines = (_squash(line) for line in "".join(parts).split("\n"))
    return "\n".join(line for line in lines if line)


def _list_lines(el: _Element, depth: int = 0) -> list[str]:
    lines: list[str] = []
    for item in el:
        if item.tag != "item":
            continue
        text = _squash(_inline(item, skip=("list",)))
        if text:
            lines.append(f"{'  ' * depth}- {text}")
        for sub in item:
            if sub.tag == "list":
                lines.extend(_list_lines(sub, depth + 1))
    return lines


def _walk(main: _Element, builder: DocumentBuilder, captions: dict[str, list[str]]) -> str:
    """Feeds trafilatura's ``<main>`` to the builder; returns the first heading's text."""
    first_heading = ""
    builder.paragraph(_squash(main.text or ""))
    for el in main:
        tag = el.tag
        if tag == "head":
            m = _HEADING_REND.match(el.get("rend") or "")
            title = _squash(_inline(el))
            builder.heading(int(m.group(1)) if m else 2, title)
            first_heading = first_heading or title
        elif tag == "list":
            builder.paragraph("\n".join(_list_lines(el)))
        elif tag == "table":
            rows = [
                [_squash(_inline(cell)) for cell in row if cell.tag == "cell"]
                for row in el
                if row.tag == "row"
            ]
            first = next((r for r in rows if any(r)), [])
            pending = captions.get(_signature(first)) if first else None
            builder.table(rows, caption=pending.pop(0) if pending else None)
        elif tag == "code":
            code = "".join(el.itertext()).strip("\n")
            if code.strip():
                builder.paragraph(f"```\n{code}\n```")
        elif tag != "graphic":  # p, quote, and whatever else carries text
            builder.paragraph(_inline(el))
        builder.paragraph(_squash(el.tail or ""))
    return first_heading
