"""Whitespace analysis: lower-case and split on whitespace. The naive baseline (fails on Chinese,
which has no spaces: a whole sentence becomes one term)."""

from __future__ import annotations

from collections.abc import Sequence

from rag_lab.validate import boolean


class WhitespaceTokenizer:
    def __init__(self, lowercase: bool = True) -> None:
        self.lowercase = boolean(lowercase, "lowercase")

    def __call__(self, texts: Sequence[str]) -> list[list[str]]:
        return [(t.lower() if self.lowercase else t).split() for t in texts]
