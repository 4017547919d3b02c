"""Access policy protocol: which chunks a query's principal may read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from rag_lab.types import Chunk


@runtime_checkable
class AccessPolicy(Protocol):
    """Contract: ``readable(chunk, principal)`` is ``True`` only when the principal (a query's
    ``principal`` metadata, ``None`` for an anonymous query) may read the chunk; fail-closed: a
    chunk whose readers are unknown or malformed is unreadable unless the policy's config says
    otherwise. ``key(principal)`` is a canonical, JSON-able form of what decides readability for
    that principal (two principals with one key read the same chunks): it keys cached runs and
    groups queries that share one pre-filter. Pure and deterministic."""

    def readable(self, chunk: Chunk, principal: Any) -> bool: ...

    def key(self, principal: Any) -> Any: ...

    def allowed(self, chunks: Mapping[str, Chunk], principal: Any) -> frozenset[str]: ...
