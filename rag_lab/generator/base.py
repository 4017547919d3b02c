"""Generator protocol: a query and its retrieved chunks → an answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from rag_lab.types import Chunk


@runtime_checkable
class Generator(Protocol):
    """Contract: answers from the given chunks only (ordered best first)."""

    def generate(self, query: str, chunks: Sequence[Chunk]) -> str: ...
