"""Plain immutable data passed between stages.

Runs and labels use the BEIR / ranx currency: ``Run = dict[query_id, dict[unit_id, score]]``
(higher score = better) and ``Qrels = dict[query_id, dict[doc_id, grade]]``. Stages never mutate
their inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]


def _freeze(meta: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(meta or {}))


@dataclass(frozen=True)
class Section:
    """A span ``[start, end)`` of a document's text under a heading path (e.g.
    ``("E102", "Causes")``).

    ``metadata`` holds what the parser knows about the span and chunkers copy into the chunks
    that start in it: ``page`` (1-based), ``kind`` (``table`` for a table of its own), ``caption``,
    ``ocr`` (text recognised from an image), ``confidence`` (mean OCR confidence, 0-1),
    ``section_type`` (set by the metadata contract).
    """

    start: int
    end: int
    path: tuple[str, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _freeze(self.metadata))

    @property
    def title(self) -> str:
        return " > ".join(self.path)


@dataclass(frozen=True)
class Document:
    """A parsed source document.

    ``metadata`` follows the metadata contract (all optional): ``doc_type``, ``language``,
    ``version``, ``valid_from``, ``valid_to`` (ISO dates), ``entities`` (list), ``source`` (file).
    ``sections`` cover (parts of) ``text`` in order; chunkers use them for section metadata and
    semantic boundaries. ``stats`` is what parsing measured (``pages``, ``text_layer_pages``,
    ``ocr_pages``, ``ocr_skipped_pages``, ``tables``): the ingest report reads it, chunks do not
    carry it.
    """

    doc_id: str
    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    sections: tuple[Section, ...] = ()
    stats: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _freeze(self.metadata))
        object.__setattr__(self, "stats", _freeze(self.stats))

    def section_at(self, offset: int) -> Section | None:
        """The innermost section containing character ``offset`` (sections are non-overlapping)."""
        for sec in self.sections:
            if sec.start <= offset < sec.end:
                return sec
        return None


@dataclass(frozen=True)
class Chunk:
    """A retrievable unit: ``text == document.text[start:end]`` (for chunkers that slice).

    ``chunk_id`` is ``f"{doc_id}#{index}"``; ``section`` is the heading path title of the section
    the chunk starts in (empty when the document has no sections); ``metadata`` carries all of the
    document's metadata.
    """

    chunk_id: str
    doc_id: str
    text: str
    start: int
    end: int
    title: str = ""
    section: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _freeze(self.metadata))

    @property
    def index_text(self) -> str:
        """What retrievers index and embed: title, section path and text."""
        head = " ".join(p for p in (self.title, self.section) if p)
        return f"{head}\n{self.text}" if head else self.text


@dataclass(frozen=True)
class Query:
    """A labelled query. ``metadata`` may hold ``category``, ``answers`` and ``evidence`` (lists of
    gold strings used for evidence-level relevance) and ``history`` (``Query.history``)."""

    query_id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _freeze(self.metadata))

    @property
    def category(self) -> str | None:
        cat = self.metadata.get("category")
        return None if cat is None else str(cat)

    @property
    def history(self) -> tuple[str, ...]:
        """The previous user turns of the query's conversation, oldest first (``metadata.history``;
        filled from ``conversation_id`` + ``turn`` by the dataset loader); ``()`` for a query that
        stands alone."""
        return tuple(str(t) for t in self.metadata.get("history") or ())

    @property
    def evidence(self) -> tuple[str, ...]:
        """Gold answer and evidence strings (either key may be absent)."""
        out: list[str] = []
        for key in ("answers", "evidence"):
            val = self.metadata.get(key) or []
            out.extend([val] if isinstance(val, str) else [str(v) for v in val])
        return tuple(s for s in out if s.strip())


def document_to_dict(doc: Document) -> dict[str, Any]:
    """JSON-ready form (for the stage cache and exports)."""
    return {
        "doc_id": doc.doc_id,
        "text": doc.text,
        "title": doc.title,
        "metadata": dict(doc.metadata),
        "sections": [
            {"start": s.start, "end": s.end, "path": list(s.path), "metadata": dict(s.metadata)}
            for s in doc.sections
        ],
        "stats": dict(doc.stats),
    }


def document_from_dict(d: Mapping[str, Any]) -> Document:
    sections = tuple(
        Section(s["start"], s["end"], tuple(s["path"]), s.get("metadata", {}))
        for s in d.get("sections", ())
    )
    return Document(
        d["doc_id"],
        d["text"],
        d.get("title", ""),
        d.get("metadata", {}),
        sections,
        d.get("stats", {}),
    )


def chunk_to_dict(chunk: Chunk) -> dict[str, Any]:
    return {
        f: getattr(chunk, f)
        for f in ("chunk_id", "doc_id", "text", "start", "end", "title", "section")
    } | {"metadata": dict(chunk.metadata)}


def chunk_from_dict(d: Mapping[str, Any]) -> Chunk:
    return Chunk(**{**d, "metadata": d.get("metadata", {})})


@dataclass(frozen=True)
class LabelledQueries:
    """One split of a dataset.

    ``queries`` holds exactly the queries named in the split's qrels (BEIR convention: a query
    belongs to a split iff it has a judgment row there). A query whose judgments are all grade 0
    is *unanswerable*: it counts for noise ratio but not for the ranking metrics.
    ``fingerprint`` hashes the corpus sources, the queries and the qrels file bytes;
    ``corpus_fingerprint`` the corpus sources alone (names and bytes), which is what keys the
    parse/chunk/embed stages, so editing labels never re-embeds.
    ``on_empty`` is the dataset's policy for documents with empty text (``skip`` or ``fail``),
    for ``rag_lab.pipeline.corpus.read_corpus``. ``corpus_left_out``: ``(path, reason)`` of the
    corpus folder's entries not read (links out of it, dangling links, linked folders, hidden
    files: ``rag_lab.io.files.list_corpus_folder``), which the corpus read counts.
    """

    name: str
    split: str
    corpus_sources: tuple[Path, ...]
    corpus_root: Path
    queries: dict[str, Query]
    qrels: Qrels
    fingerprint: str
    corpus_fingerprint: str = ""
    warnings: tuple[str, ...] = field(default=())
    on_empty: str = "skip"
    corpus_left_out: tuple[tuple[str, str], ...] = ()
    # False: a label-free query set (no query judged; ``rag_lab.metrics.score.label_free_metrics``)
    labelled: bool = True
