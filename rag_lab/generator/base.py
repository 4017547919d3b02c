"""Generator protocol: a query and its retrieved chunks → an answer; ``Cacheable``: the optional
capability of describing the request, which lets the answer stage cache the answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from rag_lab.types import Chunk


@runtime_checkable
class Generator(Protocol):
    """Contract: answers from the given chunks only (ordered best first); when they do not hold the
    answer, replies with ``REFUSALS[language]``. Failures that retries did not cure raise (a
    ``RagLabError`` naming the endpoint or model), they never come back as an empty answer.
    ``notes`` (short lines such as "sources disagree on ...") go before the numbered chunks of the
    context (``build_context``); the answer stage passes them only when a query has some."""

    def generate(self, query: str, chunks: Sequence[Chunk], notes: Sequence[str] = ()) -> str: ...


@runtime_checkable
class Cacheable(Protocol):
    """A model-backed generator (openai, transformers) that can say what determines its answer.

    ``request(query, chunks)`` is the JSON-ready description of everything that decides the answer
    (model identity, messages, decoding settings; never a secret), or None when the answer needs
    no model call (no chunks: the refusal). The answer stage caches such generators' answers on
    disk under that description, so a rerun does not call the model again."""

    def request(
        self, query: str, chunks: Sequence[Chunk], notes: Sequence[str] = ()
    ) -> dict[str, Any] | None: ...
