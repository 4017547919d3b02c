"""Context-stage protocol: what happens to a query's top chunks between retrieval and the
generator (ordering, near-duplicate removal, the token budget, distillation), composed as a
list: ``context=[order,dedupe,distill]``; applied by the answer stage
(``rag_lab.pipeline.answers``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from rag_lab.types import Chunk


@runtime_checkable
class ContextStage(Protocol):
    """Contract: ``apply(query, chunks)`` takes the chunks the generator would read, best first,
    and returns a new list (a reordering, a subset, or chunks whose ``text`` is cut down to what
    matters; ids and metadata kept, so block ``[n]`` of the context still cites its source).
    Never mutates its input; deterministic for the same input (LLM stages: through the cache)."""

    def apply(self, query: str, chunks: Sequence[Chunk]) -> list[Chunk]: ...
