"""The token budget as a context stage: the chunks ``build_context`` fits in ``max_tokens``
pre-tokens (the same rule the generators apply with ``max_context_tokens``), so a stage after
it (a distiller) reads only what fits."""

from __future__ import annotations

from collections.abc import Sequence

from rag_lab.generator.context import build_context
from rag_lab.text.language import detect_language
from rag_lab.types import Chunk
from rag_lab.validate import integer


class TokenBudget:
    """Args: ``max_tokens``: budget in pre-tokens (headers included; ``build_context``: chunks in
    order until one does not fit, the first one cut rather than dropped)."""

    def __init__(self, max_tokens: int = 1500) -> None:
        self.max_tokens = integer(max_tokens, "max_tokens", ge=1)

    def apply(self, query: str, chunks: Sequence[Chunk]) -> list[Chunk]:
        return build_context(chunks, self.max_tokens, detect_language(query))[1]
