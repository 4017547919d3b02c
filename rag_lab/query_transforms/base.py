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


@runtime_checkable
class QueryVariants(Protocol):
    """A transform that has a retriever run other texts for a query (multi-query rewrites, a HyDE
    passage). ``variants(queries, retriever)`` gives, per query id, every text the retriever named
    ``retriever`` runs for it (the query's own text included only if listed); an id left out
    runs its own text alone. The pipeline retrieves each text and fuses one query's lists by
    reciprocal rank (``rag_lab.pipeline.VARIANT_RRF_K``) into that retriever's run; several such
    transforms: the ordered union of their texts. ``transform`` leaves the texts unchanged."""

    def variants(self, queries: Mapping[str, str], retriever: str) -> dict[str, list[str]]: ...
