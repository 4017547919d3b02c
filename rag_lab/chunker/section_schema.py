"""Chunks that follow the document's section tree: a block under one heading (a troubleshooting
entry: symptom → causes → check steps → safety warning) stays whole while it fits the budget.

A block larger than ``max_chars`` is split on its sub-headings, recursively; small sibling
blocks are merged while they fit (never across their parent). Each piece's section path (its
heading and every heading above it) is in ``chunk.section``, which retrievers index with the
text, and in ``metadata["section_path"]``, so a piece cut from a large block still says what it
belongs to. A section with no sub-headings that is still too large is split like the recursive
chunker splits it (paragraphs, lines, sentences); a table (a ``kind: table`` section, or pipe-table
lines) is split only between rows, never inside one. A heading with no body of its own is not a
chunk: its title is part of the next chunks' section path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from rag_lab.chunker.base import SpanChunker
from rag_lab.chunker.recursive import RecursiveChunker
from rag_lab.types import Document, Section
from rag_lab.validate import integer

_HEADING_ONLY = re.compile(r"#{1,6}[ \t][^\n]*")
_TABLE_LINE = re.compile(r"^[ \t]*\|.*\|[ \t]*$", re.M)

Span = tuple[int, int]


class SectionSchemaChunker(SpanChunker):
    """Args:
    max_chars: size budget of a chunk in characters (a single table row longer than it stays
        whole).
    """

    def __init__(self, max_chars: int = 1200) -> None:
        self.max_chars = integer(max_chars, "max_chars", ge=1)
        self._leaf = RecursiveChunker(max_chars=self.max_chars)

    def _rows(self, text: str, start: int, end: int) -> list[Span]:
        """Whole lines of a table section, grouped up to the budget."""
        lines = [(m.start(), m.end()) for m in re.finditer(r"[^\n]+", text[start:end])]
        out: list[Span] = []
        for a, b in ((start + a, start + b) for a, b in lines):
            if out and b - out[-1][0] <= self.max_chars:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
        return out

    def _leaf_pieces(self, text: str, sec: Section) -> list[Span]:
        a, b = sec.start, sec.end
        if b - a <= self.max_chars:
            return [(a, b)]
        body = text[a:b]
        if sec.metadata.get("kind") == "table" or (
            len(_TABLE_LINE.findall(body)) >= max(2, body.count("\n") // 2)
        ):
            return self._rows(text, a, b)
        return self._leaf.split_span(text, a, b)

    def _pieces(self, text: str, secs: Sequence[Section], depth: int) -> list[Span]:
        start, end = secs[0].start, secs[-1].end
        if end - start <= self.max_chars:
            return [(start, end)]
        # consecutive sections grouped by their heading at `depth` (None: the block's own text)
        groups: list[tuple[str | None, list[Section]]] = []
        for sec in secs:
            key = sec.path[depth] if len(sec.path) > depth else None
            if key is not None and groups and groups[-1][0] == key:
                groups[-1][1].append(sec)
            else:
                groups.append((key, [sec]))
        parts: list[list[Span]] = []
        for key, members in groups:
            if key is None:
                own = self._leaf_pieces(text, members[0])
                # a heading with no body: its title lives on in the next section paths
                own = [(a, b) for a, b in own if not _HEADING_ONLY.fullmatch(text[a:b].strip())]
                if own:
                    parts.append(own)
            else:
                parts.append(self._pieces(text, members, depth + 1))
        # merge whole small siblings (a group that came back as one piece) while they fit
        out: list[Span] = []
        whole_run = False
        for pieces in parts:
            whole = len(pieces) == 1
            if whole and whole_run and pieces[0][1] - out[-1][0] <= self.max_chars:
                out[-1] = (out[-1][0], pieces[0][1])
                continue
            out.extend(pieces)
            whole_run = whole
        return out

    def spans(self, doc: Document) -> Iterable[Span]:
        text = doc.text
        if not doc.sections:
            whole = Section(0, len(text), ())
            return self._leaf_pieces(text, whole)
        out: list[Span] = []
        lead = doc.sections[0].start
        if lead > 0 and text[:lead].strip():
            out.extend(self._leaf_pieces(text, Section(0, lead, ())))
        for s, e in self._pieces(text, doc.sections, 0):
            if _HEADING_ONLY.fullmatch(text[s:e].strip()):
                continue  # a heading with no body: its title lives on in the next section paths
            out.append((s, e))
        return out
