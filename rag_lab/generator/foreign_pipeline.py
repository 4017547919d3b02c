"""The answers of a foreign pipeline evaluated end to end (``retrievers=[foreign_pipeline]``): no
model call here, the answer is the one the foreign pipeline gave in the same invocation that
returned its sources (``rag_lab.adapters.answers``)."""

from __future__ import annotations

from collections.abc import Sequence

from rag_lab.adapters.answers import lookup
from rag_lab.errors import ConfigError
from rag_lab.types import Chunk


class ForeignPipelineGenerator:
    """Args:
    board: the board the foreign pipeline retriever publishes on (its ``answers_as``).

    ``generate(query, chunks)`` returns the recorded answer for ``query``; ``ConfigError`` when
    there is none (the foreign pipeline is not among the retrievers, or a query transform changed
    the text it was sent)."""

    def __init__(self, board: str = "foreign_pipeline") -> None:
        self.board = str(board)

    def generate(self, query: str, chunks: Sequence[Chunk], notes: Sequence[str] = ()) -> str:
        hit = lookup(self.board, query)
        if hit is None:
            raise ConfigError(
                f"generator=foreign_pipeline: no answer recorded on board {self.board!r} for "
                f"{query[:60]!r}: add retrievers=[foreign_pipeline] (answers_as={self.board}) "
                "and no query transforms"
            )
        return str(hit["answer"])
