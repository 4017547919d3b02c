"""Generator protocol: a query and its retrieved chunks → an answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from rag_lab.types import Chunk


@runtime_checkable
class Generator(Protocol):
    """Contract: answers from the given chunks only (ordered best first); when they do not hold the
    answer, replies with ``REFUSALS[language]``. Failures that retries did not cure raise (a
    ``RagLabError`` naming the endpoint or model), they never come back as an empty answer.

    Optional: a model-backed generator also has ``request(query, chunks) -> dict | None``, the
    JSON-ready description of everything that determines its answer (model identity, messages,
    decoding settings; never a secret). The answer stage caches such generators' answers on disk
    under that key, so a rerun does not call the model again (``None``: not cached)."""

    def generate(self, query: str, chunks: Sequence[Chunk]) -> str: ...
