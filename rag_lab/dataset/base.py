"""Dataset protocol: labelled queries plus the corpus sources a parser turns into documents;
``SplitAware``: the optional capability of saying which splits exist."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from rag_lab.types import Qrels, Query


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
    for ``rag_lab.pipeline.corpus.read_corpus``.
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


@runtime_checkable
class Dataset(Protocol):
    """Loads a split. Must raise ``DataError`` naming the file (and line) on bad input."""

    def load(self) -> LabelledQueries: ...


@runtime_checkable
class SplitAware(Protocol):
    """A dataset that can tell whether it has a split without loading it (BEIR: whether
    ``qrels/<split>.tsv`` exists). Training uses it to skip the leakage check of a split that is
    not there instead of failing on it."""

    def has_split(self, split: str) -> bool: ...
