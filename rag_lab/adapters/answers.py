"""Where an end-to-end foreign pipeline's answers wait for the answer stage.

``retrievers=[foreign_pipeline]`` invokes the foreign pipeline once per query (or reads that
invocation back from the stage cache) and gets both the answer and the sources; the run is the
sources. The answer stage runs later, through the ``generator`` slot: ``generator=
foreign_pipeline`` reads the answer of *the same invocation* from this board, by the board name
both configs share (``answers_as`` / ``board``, default ``foreign_pipeline``) and the query text.
The pipeline always calls such a retriever (``rag_lab.protocols.CachesOwnRuns``), so the board is
filled in every process that evaluates it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_BOARD: dict[str, dict[str, dict[str, Any]]] = {}


def publish(board: str, query: str, answer: str, chunk_ids: Sequence[str]) -> None:
    """Record ``answer`` (and the chunk ids its sources mapped to) for ``query``."""
    _BOARD.setdefault(board, {})[query] = {"answer": answer, "ids": list(chunk_ids)}


def lookup(board: str, query: str) -> dict[str, Any] | None:
    """``{"answer", "ids"}`` published for ``query`` on ``board``, or None."""
    return _BOARD.get(board, {}).get(query)
