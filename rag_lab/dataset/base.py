"""Dataset protocol: loads one split as ``LabelledQueries`` (``rag_lab.types``: labelled queries
plus the corpus sources a parser turns into documents); ``SplitAware``: the optional capability
of saying which splits exist."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from rag_lab.types import LabelledQueries


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
