"""Ordering rule: chunks of the named section types first (safety warnings before anything
else), the rest after them; within each group the retrieval order (best score first)."""

from __future__ import annotations

from collections.abc import Sequence

from rag_lab.types import Chunk


class SectionOrder:
    """Args:
        first: ``section_type`` values (the metadata contract's) that go first, in this order
            (default ``[safety_warning]``).
        field: the metadata field read (default ``section_type``).

    A stable partition: a chunk whose field is not in ``first`` keeps its rank among the rest,
    so without such a chunk in the top k the stage changes nothing."""

    def __init__(self, first: Sequence[str] = ("safety_warning",), field: str = "section_type"):
        self.first = [str(f) for f in first]
        self.field = str(field)

    def apply(self, query: str, chunks: Sequence[Chunk]) -> list[Chunk]:
        def group(chunk: Chunk) -> int:
            value = chunk.metadata.get(self.field)
            return self.first.index(value) if value in self.first else len(self.first)

        return sorted(chunks, key=group)  # sorted is stable: ties keep the retrieval order
