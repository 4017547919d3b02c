"""Tokenizer protocol: the term analysis shared by lexical retrievers (BM25) and the hashing
embedder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Tokenizer(Protocol):
    """Turns texts into lists of index terms.

    Contract: deterministic, batch in → batch out (same length, same order); a query and a
    document go through the same analysis; terms are already normalised (lower-cased, stemmed
    where the variant stems), so retrievers compare them as plain strings.
    """

    def __call__(self, texts: Sequence[str]) -> list[list[str]]: ...
