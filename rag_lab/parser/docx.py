"""Word ``.docx`` files (manuals, procedures, specifications): body text as Markdown, with
heading styles as sections, tables as tables and the core properties as metadata."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.errors import DataError
from rag_lab.parser._builder import DocumentBuilder
from rag_lab.parser._records import (
    CONTRACT_DATES,
    is_empty,
    iso_date,
    json_value,
    source_of,
    split_list,
)
from rag_lab.parser.base import relative_id
from rag_lab.types import Document
from rag_lab.validate import boolean, number

if TYPE_CHECKING:
    from docx.document import Document as WordDocument
    from docx.table import Table, _Cell
    from docx.text.paragraph import Paragraph

# "Heading 2" (Word's English names, also what python-docx reports for the built-in styles of a
# Word file in any UI language), "heading 2", "标题 2" (WPS and some Chinese templates)
_HEADING_STYLE = re.compile(r"^(?:heading|标题)\s*([1-9])$", re.I)
_TITLE_STYLES = ("title", "标题")
_CAPTION_STYLES = ("caption", "题注")
# core properties kept as metadata under their own names (title and identifier are used as the
# document's title and id instead)
_CORE_FIELDS = (
    "subject",
    "author",
    "keywords",
    "category",
    "created",
    "modified",
    "revision",
    "version",
    "language",
    "content_status",
)


def _squash(text: str) -> str:
    return " ".join(text.split())


def _lines(text: str) -> str:
    """Spaces squashed within each line, blank lines dropped (soft line breaks kept)."""
    lines = (_squash(line) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


class DocxParser:
    """Args:
    comments_metadata: read the ``comments`` core property as YAML metadata (below).

    One document per file, written as Markdown from the body in reading order: paragraphs in
    a "Heading N" style (also "标题 N", and styles based on one) are headings whose trail is
    the section path; the first "Title" paragraph is the document title and a level-1 heading;
    list paragraphs (a "List ..." style or Word numbering) become ``- item`` lines, indented by
    list level; each table is a section of its own (a "Caption" paragraph just above it is its
    caption). A merged cell's text is repeated in every grid cell it covers (across and down),
    so each Markdown row reads on its own; a table inside a cell becomes that cell's text
    (``a, b; c, d``: cells, rows). Headers, footers, footnotes, comments and text boxes are not
    read.

    Metadata: the core properties ``subject``, ``author``, ``keywords`` (split on ``,`` / ``;``
    into a list), ``category``, ``created`` / ``modified`` (ISO datetimes), ``revision``,
    ``version``, ``language``, ``content_status``; empty ones are left out. ``identifier`` is
    the document id (else the path relative to the corpus root) and ``title`` the title (else
    the "Title" paragraph, the first heading, the file name).

    Convention for the contract fields Word has no property for: the ``comments`` property
    (File > Info > Properties > Comments) may hold a YAML mapping, e.g.
    ``valid_from: 2024-01-01`` / ``valid_to: 2025-12-31`` / ``source_type: manual`` on separate
    lines. Its keys are merged into the metadata, over core properties of the same name
    (``doc_id`` and ``title`` there set the id and title); dates become ISO strings, and
    ``valid_from`` / ``valid_to`` must be dates. A comment that is not a YAML mapping (plain
    prose) is kept as ``metadata['comments']``. Caveat: prose of the form ``Draft: check
    figures`` parses as a mapping too.

    A file that is not a Word document (not a zip, a zip without the Word parts, another Office
    format, malformed XML inside) is a ``DataError``.

    Size limits, checked on the zip's directory before anything is inflated (a zip member is
    never inflated past the size its directory entry states: ``zipfile`` stops there and fails
    the CRC): ``max_xml_mb``, the XML parts (body, styles, relationships: what is parsed,
    into trees of ~4x their size) unzipped, and ``max_unzipped_mb``, all parts (images
    included: python-docx holds every part in memory). A file over either is a ``DataError``
    naming the sizes and the option (``parser.on_error=skip`` skips and counts it): a 532 KB
    file of repeated paragraphs unzips to 305 MB of text.
    """

    suffixes = (".docx",)

    def __init__(
        self, comments_metadata: bool = True, max_xml_mb: float = 50, max_unzipped_mb: float = 500
    ) -> None:
        self.comments_metadata = boolean(comments_metadata, "comments_metadata")
        self.max_xml_mb = number(max_xml_mb, "max_xml_mb", gt=0)
        self.max_unzipped_mb = number(max_unzipped_mb, "max_unzipped_mb", gt=0)

    def parse(self, path: Path, root: Path) -> Iterator[Document]:
        word = _open(path, self.max_xml_mb, self.max_unzipped_mb)
        builder = DocumentBuilder()
        try:
            doc_id, title, meta = self._metadata(word, path)
            title_paragraph, first_heading = _Body(word, builder).read()
        except DataError:
            raise
        except Exception as exc:  # python-docx on corrupt XML raises many types
            # (InvalidXmlError, ValueError, KeyError, ...): whatever a malformed part trips
            raise DataError(
                f"{path}: unreadable Word content ({type(exc).__name__}: {_squash(str(exc))})"
            ) from None
        doc_id = doc_id or relative_id(path, root)
        meta["source"] = source_of(path, root)
        title = title or title_paragraph or first_heading or path.stem
        yield builder.build(doc_id, title, meta)

    def _metadata(self, word: WordDocument, path: Path) -> tuple[str, str, dict[str, Any]]:
        """``(doc_id or "", title or "", metadata)`` from the core properties."""
        props = word.core_properties
        meta: dict[str, Any] = {}
        for key in _CORE_FIELDS:
            value = getattr(props, key, None)
            if key == "revision" and value == 0:  # python-docx's value for "not set"
                continue
            if key == "keywords" and isinstance(value, str):
                value = split_list(value)
            if not is_empty(value) and value != []:
                meta[key] = json_value(value)
        doc_id = _squash(props.identifier or "")
        title = _squash(props.title or "")
        comments = (props.comments or "").strip()
        if comments:
            extra = _comments_yaml(comments, path) if self.comments_metadata else None
            if extra is None:
                meta["comments"] = comments
            else:
                doc_id = _squash(str(extra.pop("doc_id", None) or "")) or doc_id
                title = _squash(str(extra.pop("title", None) or "")) or title
                meta.update({k: v for k, v in extra.items() if not is_empty(v)})
        for key in CONTRACT_DATES:
            if key in meta:
                meta[key] = iso_date(meta[key], f"{path}: comments property", key)
        return doc_id, title, meta


_MB = 1_000_000
_XML_PART = re.compile(r"\.(?:xml|rels)$", re.I)


def _check_sizes(path: Path, max_xml_mb: float, max_unzipped_mb: float) -> None:
    """Refuse a zip whose parts would unzip past the limits (``DocxParser``), from the sizes in
    its directory: nothing is inflated here."""
    try:
        with zipfile.ZipFile(path) as zf:
            members = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise DataError(f"{path}: not a Word .docx file ({type(exc).__name__}: {exc})") from None
    xml = sum(m.file_size for m in members if _XML_PART.search(m.filename))
    total = sum(m.file_size for m in members)
    packed = path.stat().st_size
    for size, limit, what, key in (
        (xml, max_xml_mb, "XML", "max_xml_mb"),
        (total, max_unzipped_mb, "content", "max_unzipped_mb"),
    ):
        if size > limit * _MB:
            raise DataError(
                f"{path}: Word file too large: {size / _MB:,.0f} MB of {what} unzipped from "
                f"{_size(packed)} (limit {limit:g} MB: parser.parsers.docx.{key})"
            )


def _size(n: int) -> str:
    return f"{n / _MB:,.1f} MB" if n >= _MB else f"{n / 1000:,.0f} KB"


def _open(path: Path, max_xml_mb: float = 50, max_unzipped_mb: float = 500) -> WordDocument:
    import docx

    if not zipfile.is_zipfile(path):
        raise DataError(f"{path}: not a Word .docx file (not a zip archive)")
    _check_sizes(path, max_xml_mb, max_unzipped_mb)
    try:
        return docx.Document(str(path))
    except KeyError as exc:  # a part the package names is missing
        reason = f"missing part: {_squash(str(exc.args[0] if exc.args else exc))}"
    except ValueError as exc:  # another Office format: "file '...' is not a Word file, ..."
        reason = _squash(str(exc).replace(f"file '{path}' ", ""))
    except Exception as exc:  # zip and XML errors of a corrupt file, of many types
        reason = f"{type(exc).__name__}: {_squash(str(exc))}"
    raise DataError(f"{path}: not a Word .docx file ({reason})")


def _comments_yaml(text: str, path: Path) -> dict[str, Any] | None:
    """The ``comments`` property as a metadata mapping, ``None`` when it is not one (prose)."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    except (ValueError, TypeError, OverflowError) as exc:  # yaml's date constructor: 2024-13-45
        raise DataError(
            f"{path}: comments property: malformed YAML metadata ({_squash(str(exc))})"
        ) from None
    except RecursionError:
        raise DataError(f"{path}: comments property: YAML nested too deeply") from None
    if not isinstance(data, dict):
        return None
    try:
        return {str(k): json_value(v) for k, v in data.items()}
    except RecursionError:  # an alias inside its own anchor
        raise DataError(f"{path}: comments property: YAML refers to itself") from None


def _style_names(style: Any) -> list[str]:
    """The paragraph style's name and those of the styles it is based on (nearest first)."""
    names: list[str] = []
    for _ in range(10):  # a cycle of base styles in a broken file must not hang
        if style is None:
            break
        names.append((style.name or "").strip().lower())
        style = style.base_style
    return names


class _Body:
    """Walks a document's body into a ``DocumentBuilder``."""

    def __init__(self, word: WordDocument, builder: DocumentBuilder) -> None:
        self.word = word
        self.builder = builder
        self.title = ""
        self.first_heading = ""
        self.list_lines: list[str] = []
        self.caption: str | None = None

    def read(self) -> tuple[str, str]:
        """``(text of the first Title paragraph, text of the first heading)``."""
        self._blocks(self.word.element.body)
        self._flush()
        return self.title, self.first_heading

    def _blocks(self, container: Any) -> None:
        from docx.oxml.ns import qn
        from docx.table import Table
        from docx.text.paragraph import Paragraph

        for child in container.iterchildren():
            if child.tag == qn("w:p"):
                self._paragraph(Paragraph(child, self.word))
            elif child.tag == qn("w:tbl"):
                self._table(Table(child, self.word))
            elif child.tag == qn("w:sdt"):  # a content control: its blocks are body blocks
                content = child.find(qn("w:sdtContent"))
                if content is not None:
                    self._blocks(content)

    def _flush(self, keep_caption: bool = False) -> None:
        if self.list_lines:
            self.builder.paragraph("\n".join(self.list_lines))
            self.list_lines = []
        if self.caption is not None and not keep_caption:
            self.builder.paragraph(self.caption)
            self.caption = None

    def _paragraph(self, para: Paragraph) -> None:
        text = _lines(para.text)
        if not text:
            return
        names = _style_names(para.style)
        level = _heading_level(names)
        if level is not None:
            self._flush()
            title = _squash(text)
            if level == 0:
                self.title = self.title or title
                level = 1
            self.first_heading = self.first_heading or title
            self.builder.heading(level, title)
            return
        if any(n in _CAPTION_STYLES for n in names[:1]):
            self._flush()
            self.caption = _squash(text)  # a table's caption if a table follows
            return
        depth = _list_level(para, names)
        if depth is not None:
            if self.caption is not None:
                self._flush()
            self.list_lines.append(f"{'  ' * depth}- {_squash(text)}")
            return
        self._flush()
        self.builder.paragraph(text)

    def _table(self, table: Table) -> None:
        self._flush(keep_caption=True)
        caption, self.caption = self.caption, None
        self.builder.table(_table_rows(table), caption=caption)


def _heading_level(names: list[str]) -> int | None:
    """0 for a Title paragraph, N for "Heading N", ``None`` for other styles."""
    for name in names:
        if name in _TITLE_STYLES:
            return 0
        m = _HEADING_STYLE.match(name)
        if m:
            return int(m.group(1))
    return None


def _list_level(para: Paragraph, names: list[str]) -> int | None:
    """The list level (0 = top) of a list paragraph, ``None`` for other paragraphs."""
    ppr: Any = para._p.pPr
    num_pr: Any = ppr.numPr if ppr is not None else None
    if num_pr is not None and num_pr.numId is not None and num_pr.numId.val != 0:
        ilvl = num_pr.ilvl
        return int(ilvl.val) if ilvl is not None and ilvl.val is not None else 0
    name = names[0] if names else ""
    if name.startswith("list"):  # "List Bullet 2", "List Number", "List Paragraph"
        m = re.search(r"(\d+)$", name)
        return int(m.group(1)) - 1 if m else 0
    return None


def _cell_text(cell: _Cell) -> str:
    """A cell's paragraphs on one line; a nested table as ``a, b; c, d`` (cells, rows)."""
    from docx.table import Table

    parts: list[str] = []
    for block in cell.iter_inner_content():
        if isinstance(block, Table):
            rows = [", ".join(t for t in row if t) for row in _table_rows(block)]
            parts.append("; ".join(r for r in rows if r))
        else:
            parts.append(_squash(block.text))
    return " ".join(p for p in parts if p)


def _table_rows(table: Table) -> list[list[str]]:
    """The table's grid: python-docx reports a merged cell at every grid position it covers
    (the same cell object across a horizontal merge and down a vertical one), so its text is
    repeated there; each distinct cell's text is computed once."""
    texts: dict[Any, str] = {}
    rows: list[list[str]] = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            key = cell._tc
            if key not in texts:
                texts[key] = _cell_text(cell)
            cells.append(texts[key])
        rows.append(cells)
    return rows
