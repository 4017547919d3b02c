"""Fusion protocol: several retrievers' runs → one run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from rag_lab.ranking import top_k
from rag_lab.types import Run

__all__ = [
    "Fusion",
    "QueryConditioned",
    "Weighted",
    "all_query_ids",
    "check_weights",
    "top_k",
]  # top_k: rag_lab.ranking


@runtime_checkable
class Fusion(Protocol):
    """Contract: ``runs`` maps retriever name → run over the same query ids; the result scores the
    union of their chunks (higher = better) and keeps at most ``k`` per query. With a single run
    the pipeline does not call fusion at all (a no-op, so scores stay the retriever's own)."""

    def fuse(self, runs: Mapping[str, Run], k: int) -> Run: ...


@runtime_checkable
class QueryConditioned(Protocol):
    """A fusion whose weights depend on the query (``RoutedFusion``): the pipeline calls
    ``fuse_queries(queries, runs, k)`` with the texts the retrievers saw (after the query
    transforms), instead of ``fuse``. Same contract as ``Fusion.fuse``; ``fuse`` alone fuses every
    query as the default class."""

    def fuse_queries(self, queries: Mapping[str, str], runs: Mapping[str, Run], k: int) -> Run: ...


@runtime_checkable
class Weighted(Protocol):
    """A fusion whose ``weights`` are keyed by retriever name: the pipeline checks the names
    against its retrievers when it is built, before anything is retrieved."""

    weights: Mapping[str, float]


def check_weights(weights: Mapping[str, float], runs: Mapping[str, Run]) -> None:
    """Weights are keyed by retriever name: a name that is not in the pipeline is a config
    mistake."""
    unknown = set(weights) - set(runs)
    if unknown:
        raise ValueError(
            f"fusion weights name retrievers that are not in the pipeline: {sorted(unknown)}"
        )


def all_query_ids(runs: Mapping[str, Run]) -> list[str]:
    seen: dict[str, None] = {}
    for run in runs.values():
        seen.update(dict.fromkeys(run))
    return list(seen)
