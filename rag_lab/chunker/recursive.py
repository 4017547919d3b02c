"""Recursive splitting on semantic boundaries, then greedy merging up to a size budget.

Boundaries, coarsest first: Markdown headings, blank lines (paragraphs), list items, line breaks,
sentence ends (``rag_lab.text.SENTENCE_BOUNDARY``: ``. ! ?`` followed by space, and Chinese
``。！？；``), clause marks (``，,;：``), and finally a hard cut. A span larger than
``max_chars`` is split at the coarsest boundary it contains; adjacent pieces are then merged
while they fit. Pieces are never merged across a heading, so a chunk stays inside one section; a
heading with no body of its own (directly followed by a sub-heading) is not a chunk: its title is
part of the next chunks' ``section`` path, which retrievers index with the chunk text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rag_lab.chunker.base import SpanChunker
from rag_lab.text.patterns import SENTENCE_BOUNDARY
from rag_lab.types import Document
from rag_lab.validate import OptionError, integer

_HEADING_ONLY = re.compile(r"#{1,6}[ \t][^\n]*")
# Each pattern matches the position where a new piece starts.
BOUNDARIES: tuple[re.Pattern[str], ...] = (
    re.compile(r"^(?=#{1,6}[ \t])", re.M),  # heading
    re.compile(r"(?<=\n)[ \t]*\n(?=\S)|(?<=\n\n)(?=\S)"),  # paragraph
    re.compile(r"^(?=[ \t]*(?:[-*+]|\d+[.)、]|[（(]\d+[）)])[ \t]?)", re.M),  # list item
    re.compile(r"(?<=\n)(?=\S)"),  # line
    SENTENCE_BOUNDARY,  # sentence (rag_lab.text)
    re.compile(r"(?<=[，,;；：:])"),  # clause
)


class RecursiveChunker(SpanChunker):
    """Args:
    max_chars: size budget of a chunk in characters.
    overlap_chars: carry up to this many characters of whole trailing pieces of the previous
        chunk into the next one (0 = none). Never crosses a heading.
    """

    def __init__(self, max_chars: int = 800, overlap_chars: int = 0) -> None:
        self.max_chars = integer(max_chars, "max_chars", ge=1)
        self.overlap_chars = integer(overlap_chars, "overlap_chars", ge=0)
        if self.overlap_chars >= self.max_chars:
            raise OptionError(
                "overlap_chars", overlap_chars, f"must be < max_chars ({self.max_chars})"
            )

    def _cuts(self, text: str, s: int, e: int, level: int) -> list[int]:
        pat = BOUNDARIES[level]
        # a piece starts where the boundary match ends (after a blank line or sentence space)
        return sorted({m.end() for m in pat.finditer(text, s, e)} - {s, e})

    def _split(self, text: str, s: int, e: int, level: int) -> list[tuple[int, int]]:
        if e - s <= self.max_chars:
            return [(s, e)]
        if level >= len(BOUNDARIES):
            return [(i, min(i + self.max_chars, e)) for i in range(s, e, self.max_chars)]
        cuts = self._cuts(text, s, e, level)
        if not cuts:
            return self._split(text, s, e, level + 1)
        bounds = [s, *cuts, e]
        out: list[tuple[int, int]] = []
        for a, b in zip(bounds, bounds[1:]):
            out.extend(self._split(text, a, b, level + 1))
        return out

    def _merge(self, pieces: list[tuple[int, int]]) -> list[tuple[int, int]]:
        chunks: list[tuple[int, int]] = []
        i = 0
        while i < len(pieces):
            start, end = pieces[i]
            j = i + 1
            while j < len(pieces) and pieces[j][1] - start <= self.max_chars:
                end = pieces[j][1]
                j += 1
            chunks.append((start, end))
            if j >= len(pieces):
                break
            # overlap: restart at the earliest trailing piece of this chunk that fits the budget
            k = j
            while (
                k - 1 > i
                and end - pieces[k - 1][0] <= self.overlap_chars
                and pieces[j][1] - pieces[k - 1][0] <= self.max_chars
            ):
                k -= 1
            i = k
        return chunks

    def split_span(self, text: str, start: int, end: int) -> list[tuple[int, int]]:
        """``text[start:end]`` (one section's body) split below the heading level and merged
        up to ``max_chars``: what other chunkers use for a section too large to keep whole."""
        return self._merge(self._split(text, start, end, 1))

    def spans(self, doc: Document) -> Iterable[tuple[int, int]]:
        text = doc.text
        n = len(text)
        heads = [0, *self._cuts(text, 0, n, 0), n]
        out: list[tuple[int, int]] = []
        for a, b, nxt in zip(heads, heads[1:], [*heads[2:], None]):
            if nxt is not None and _HEADING_ONLY.fullmatch(text[a:b].strip()):
                # a heading with no body: its title lives on in the next chunks' section path
                continue
            out.extend(self.split_span(text, a, b))
        return out
