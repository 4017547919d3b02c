"""Shared by the structured parsers (PDF, HTML, DOCX): blocks → one Markdown document.

A parser feeds headings, paragraphs and tables in reading order; ``DocumentBuilder`` writes them
as Markdown (``#`` headings, pipe tables) and records a ``Section`` per run of blocks that share a
heading path and metadata. A table is always a section of its own (``kind: table``, its caption
and number), so a chunker can keep it whole; a new page starts a new section, so every chunk
knows its page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rag_lab.types import Document, Section

Rows = Sequence[Sequence[str | None]]

_PIPE_ROW = re.compile(r"^\|(.*)\|[ \t]*$")
_RULE_CELL = re.compile(r"^\s*:?-{3,}:?\s*$")


def clean_cell(value: object) -> str:
    """One line of cell text: ``None`` → empty, inner line breaks → spaces, ``|`` escaped."""
    if value is None:
        return ""
    return " ".join(str(value).split()).replace("|", r"\|")


def fill_merged(rows: Rows) -> list[list[str]]:
    """Merged cells made readable: a ``None`` cell (the part of a merged cell that extraction
    reports empty) takes the text of its left neighbour in a header row, else of the cell above;
    rows are padded to one width."""
    width = max((len(r) for r in rows), default=0)
    out: list[list[str]] = []
    for i, row in enumerate(rows):
        cells: list[str | None] = [*row, *([None] * (width - len(row)))]
        filled: list[str] = []
        for j, cell in enumerate(cells):
            if cell is None:
                if i == 0 and j > 0:
                    cell = filled[j - 1]
                elif i > 0:
                    cell = out[i - 1][j]
                else:
                    cell = ""
            filled.append(str(cell))
        out.append(filled)
    return out


def markdown_table(rows: Rows) -> str:
    """A GitHub pipe table; the first row is the header."""
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    lines = []
    for i, row in enumerate(rows):
        cells = [clean_cell(c) for c in row] + [""] * (width - len(row))
        lines.append("| " + " | ".join(cells) + " |")
        if i == 0:
            lines.append("|" + "|".join(["---"] * width) + "|")
    return "\n".join(lines)


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Pipe tables read back from Markdown text (rule rows dropped, ``\\|`` unescaped): what the
    parser-quality benchmark compares cell by cell."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        m = _PIPE_ROW.match(line.strip())
        if m:
            cells = [c.strip().replace(r"\|", "|") for c in re.split(r"(?<!\\)\|", m.group(1))]
            if not all(_RULE_CELL.match(c) for c in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


class DocumentBuilder:
    """Collects blocks in reading order and builds the ``Document``.

    ``context(**meta)`` sets metadata for the blocks that follow (``page=3, ocr=True,
    confidence=0.91``; a ``None`` value removes a key); ``heading`` / ``paragraph`` / ``table``
    append blocks; ``build`` returns the document.
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._pos = 0
        self._stack: list[tuple[int, str]] = []
        self._context: dict[str, Any] = {}
        self._sections: list[Section] = []
        self.n_tables = 0
        self.n_headings = 0

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(t for _, t in self._stack)

    def context(self, **meta: Any) -> None:
        for key, value in meta.items():
            if value is None:
                self._context.pop(key, None)
            else:
                self._context[key] = value

    def _append(self, text: str, meta: Mapping[str, Any]) -> None:
        if self._parts:
            self._parts.append("\n\n")
            self._pos += 2
        start = self._pos
        self._parts.append(text)
        self._pos += len(text)
        path, meta = self.path, dict(meta)
        last = self._sections[-1] if self._sections else None
        if last is not None and last.path == path and dict(last.metadata) == meta:
            self._sections[-1] = Section(last.start, self._pos, path, meta)
        else:
            self._sections.append(Section(start, self._pos, path, meta))

    def heading(self, level: int, title: str) -> None:
        """A heading at ``level`` (1 = top); it opens the section path ``(..., title)``."""
        title = " ".join(title.split())
        if not title:
            return
        level = max(1, min(int(level), 6))
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, title))
        self.n_headings += 1
        self._append(f"{'#' * level} {title}", self._context)

    def paragraph(self, text: str) -> None:
        text = text.strip()
        if text:
            self._append(text, self._context)

    def table(self, rows: Rows, caption: str | None = None, **meta: Any) -> None:
        """A table as its own section; ``caption`` becomes a bold line above it and the
        section's ``caption``; ``meta`` adds section metadata (``pages=[3, 4]``)."""
        rows = [r for r in rows if any(c not in (None, "") and str(c).strip() for c in r)]
        if not rows:
            return
        self.n_tables += 1
        caption = " ".join(caption.split()) if caption else None
        body = markdown_table(rows)
        text = f"**{clean_cell(caption)}**\n\n{body}" if caption else body
        section_meta = {**self._context, "kind": "table", "table": self.n_tables, **meta}
        if caption:
            section_meta["caption"] = caption
        self._append(text, section_meta)

    def extend(self, paragraphs: Iterable[str]) -> None:
        for p in paragraphs:
            self.paragraph(p)

    def build(
        self,
        doc_id: str,
        title: str,
        metadata: Mapping[str, Any],
        stats: Mapping[str, Any] | None = None,
    ) -> Document:
        stats = {"sections": self.n_headings, "tables": self.n_tables, **(stats or {})}
        return Document(doc_id, "".join(self._parts), title, metadata, tuple(self._sections), stats)
