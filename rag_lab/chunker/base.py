"""Chunker protocol: documents → retrievable chunks that keep provenance and metadata."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from rag_lab.types import Chunk, Document, Section


@runtime_checkable
class Chunker(Protocol):
    """Splits documents into chunks.

    Contract: for every chunk ``chunk.text == doc.text[chunk.start:chunk.end]``; chunks of a
    document are in text order with ids ``f"{doc_id}#{i}"``; each chunk carries the document's
    title, the heading path of the section it starts in, and ``chunk_metadata`` (the document's
    metadata, that section's metadata, ``section_path``). Pure: same input, same output.
    """

    def chunk(self, documents: Sequence[Document]) -> list[Chunk]: ...


@runtime_checkable
class PerDocument(Protocol):
    """A chunker whose chunks of a document depend on that document alone (``per_document``
    is ``True``): an edit chunks the documents it changed and keeps the others' chunks."""

    per_document: bool


def chunk_metadata(doc: Document, sec: Section | None) -> dict[str, Any]:
    """A chunk's metadata: the document's, then the section's (page, kind, section_type,
    confidence...) and its heading path as ``section_path``."""
    meta = dict(doc.metadata)
    if sec is not None:
        meta.update(sec.metadata)
        if sec.path:
            meta["section_path"] = list(sec.path)
    return meta


def make_chunk(doc: Document, index: int, start: int, end: int) -> Chunk:
    """Chunk ``index`` of ``doc``: ``doc.text[start:end]`` with the contract's provenance."""
    sec = doc.section_at(start)
    return Chunk(
        f"{doc.doc_id}#{index}",
        doc.doc_id,
        doc.text[start:end],
        start,
        end,
        doc.title,
        sec.title if sec else "",
        chunk_metadata(doc, sec),
    )


def trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink ``[start, end)`` so it neither starts nor ends with whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


class SpanChunker:
    """Base for chunkers defined by character spans: subclasses implement ``spans(doc)``."""

    per_document = True  # spans of one document at a time (``PerDocument``)

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
                out.append(make_chunk(doc, i, s, e))
                i += 1
        return out
