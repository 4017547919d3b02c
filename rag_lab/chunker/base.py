"""Chunker protocol: documents → retrievable chunks that keep provenance and metadata."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from rag_lab.types import Chunk, Document


@runtime_checkable
class Chunker(Protocol):
    """Splits documents into chunks.

    Contract: for every chunk ``chunk.text == doc.text[chunk.start:chunk.end]``; chunks of a
    document are in text order with ids ``f"{doc_id}#{i}"``; each chunk carries the document's
    title and metadata and the heading path of the section it starts in. Pure: same input, same
    output.
    """

    def chunk(self, documents: Sequence[Document]) -> list[Chunk]: ...


def trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink ``[start, end)`` so it neither starts nor ends with whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


class SpanChunker:
    """Base for chunkers defined by character spans: subclasses implement ``spans(doc)``."""

    def spans(self, doc: Document) -> Iterable[tuple[int, int]]:
        raise NotImplementedError

    def chunk(self, documents: Sequence[Document]) -> list[Chunk]:
        out: list[Chunk] = []
        for doc in documents:
            seen: set[tuple[int, int]] = set()
            i = 0
            for s, e in self.spans(doc):
                s, e = trim(doc.text, s, e)
                if s >= e or (s, e) in seen:
                    continue
                seen.add((s, e))
                sec = doc.section_at(s)
                out.append(
                    Chunk(
                        f"{doc.doc_id}#{i}",
                        doc.doc_id,
                        doc.text[s:e],
                        s,
                        e,
                        doc.title,
                        sec.title if sec else "",
                        doc.metadata,
                    )
                )
                i += 1
        return out
