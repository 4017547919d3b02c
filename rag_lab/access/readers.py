"""The readers policy: a chunk is readable when its document's ``readers`` name the principal's
user, one of its groups, or everyone (``*``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_lab.access.principal import Principal, principal_of, readers_of
from rag_lab.errors import DataError
from rag_lab.types import Chunk
from rag_lab.validate import choice

UNLABELLED = ("deny", "allow")


class ReadersPolicy:
    """Args:
    unlabelled: what a chunk whose document has no (or a malformed) ``readers`` field is:
        ``deny`` (fail-closed, the default: nobody reads it) or ``allow`` (everyone does: a
        corpus that is public except where marked).
    default_principal: the principal of a query that names none (``null``: anonymous, who reads
        only ``*`` documents and, with ``unlabelled: allow``, unlabelled ones).

    The check runs inside retrieval (``rag_lab.pipeline.query``: each retriever searches only the
    readable chunks, and every later stage's run is checked again), not as a post-processor that
    a config could order after something that reads the chunks."""

    def __init__(self, unlabelled: str = "deny", default_principal: Any = None) -> None:
        self.unlabelled = choice(unlabelled, "unlabelled", UNLABELLED)
        try:
            self.default = principal_of(default_principal)
        except ValueError as exc:
            raise DataError(f"permissions.default_principal: {exc}") from None

    def principal(self, value: Any) -> Principal:
        if value is None or value == "":
            return self.default
        try:
            return principal_of(value)
        except ValueError as exc:
            raise DataError(str(exc)) from None

    def readable(self, chunk: Chunk, principal: Any) -> bool:
        readers = readers_of(chunk.metadata)
        if readers is None:
            return self.unlabelled == "allow"
        return bool(readers & self.principal(principal).tokens)

    def key(self, principal: Any) -> Any:
        return {"principal": self.principal(principal).key(), "unlabelled": self.unlabelled}

    def allowed(self, chunks: Mapping[str, Chunk], principal: Any) -> frozenset[str]:
        """The ids of ``chunks`` the principal may read."""
        who = self.principal(principal)
        return frozenset(c for c, ch in chunks.items() if self.readable(ch, who))
