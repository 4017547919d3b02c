"""Query-transform protocol: what happens to a query before any retriever sees it (normalising,
rewriting, expansion), composed as a list: ``query_transforms=[normalise]``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable


@runtime_checkable
class QueryTransform(Protocol):
    """Contract: ``transform`` returns a new ``{query_id: text}`` with the same ids, in the same
    order. Pure and deterministic (its output keys the retriever runs in the stage cache)."""

    def transform(self, queries: Mapping[str, str]) -> dict[str, str]: ...
