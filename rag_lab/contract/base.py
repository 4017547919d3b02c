"""Contract protocol: the metadata every document must carry, checked and completed at ingest.

A contract runs once per corpus, after parsing and before chunking: it validates each
document's metadata (required fields, dates, identity), fills in what it can derive (the
``section_type`` of each section from its heading, ``entity_tags`` from the text) and reports
what it found. ``mode`` says what a problem does: ``strict`` stops the run naming file and field,
``warn`` records it in the ingest report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rag_lab.types import Chunk, Document

MODES = ("strict", "warn")


@dataclass(frozen=True)
class Problem:
    """One contract violation: ``where`` is the source file (``file:line`` for records)."""

    doc_id: str
    where: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: document {self.doc_id!r}: {self.field}: {self.message}"


@dataclass(frozen=True)
class Checked:
    """The documents with the derived fields filled in, and the problems found."""

    documents: tuple[Document, ...]
    problems: tuple[Problem, ...]


@runtime_checkable
class Contract(Protocol):
    """Validates and completes document metadata.

    Contract: ``check(documents, where)`` returns the same documents in the same order (same ids
    and text) with metadata completed; ``where`` maps a document id to its source for messages.
    In ``strict`` mode the first problem raises ``DataError`` (one line: file, document, field);
    in ``warn`` mode every problem is returned. Pure: same input, same output.
    """

    mode: str

    def check(self, documents: Sequence[Document], where: Mapping[str, str]) -> Checked: ...


@runtime_checkable
class ChunkTagging(Protocol):
    """A contract that also completes chunk metadata after chunking: ``tag_chunks`` returns the
    same chunks (ids, text, order) with ``entity_tags`` that hold the entities of the chunk's own
    text as well as those of the section it starts in (a chunk merged from several sections, or
    one holding a whole fault table, is tagged with every code it shows). Pure."""

    def tag_chunks(self, chunks: Sequence[Chunk]) -> list[Chunk]: ...


@runtime_checkable
class DocumentWise(Protocol):
    """A contract whose check is one document at a time plus what spans documents, so that the
    corpus read keeps each document's completion in the stage cache (an edit completes only the
    documents it changed). ``complete(doc, where)``: the document completed and its own problems
    (pure: ``where`` is used in the problems only); ``finish(done, where)``: what ``check`` returns
    for the completed documents and their problems, in order (checks across documents, such as
    a repeated identity, and ``strict`` mode's first problem)."""

    def complete(self, doc: Document, where: str) -> tuple[Document, list[Problem]]: ...

    def finish(
        self, done: Sequence[tuple[Document, Sequence[Problem]]], where: Mapping[str, str]
    ) -> Checked: ...


@runtime_checkable
class Separable(Protocol):
    """A ``DocumentWise`` contract that says whether what its ``finish`` checks across documents
    (a repeated identity) can involve a completed document: ``standalone(doc)`` is ``True``
    when it cannot, so an edit that changes only such documents, in a corpus without problems,
    keeps every other document's completion and problems as they were."""

    def standalone(self, doc: Document) -> bool: ...
