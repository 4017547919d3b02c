"""What one ``Pipeline.run`` produced (a frozen record every later step reads)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rag_lab.sources.base import Routing
from rag_lab.types import Run


@dataclass(frozen=True)
class RetrievalResult:
    """What one ``Pipeline.run`` produced.

    ``runs`` maps each stage to its output run: every retriever by name, then ``fusion`` (when
    several retrievers), then each post-processor by name, in pipeline order; ``final`` is the last
    of them. ``queries`` are the texts the retrievers saw (after query transforms).
    ``latency_ms`` is the whole retrieval path for each of the first ``latency_queries`` queries,
    run one at a time (from the cache: the latencies recorded when the run was computed).
    ``from_cache`` says, per retriever, whether its run was read back. ``seconds`` is each stage's
    wall time for the batch; ``stats`` each stage's own counters as ``<stage>/<key>``.
    With a fallback chain, ``runs`` ends with ``fallback`` (each query's run from the level that
    answered it: the final run; empty when refused); ``fallback_level`` is each query's level
    (0 = this pipeline, ``len(levels) + 1`` = refused; ``{}`` without a chain).
    ``windows`` is each stage's batch on the wall clock, ``(start, end)`` in ns since the epoch
    (``query_transforms``, each retriever, each stage of ``runs`` after them): what a query's
    trace spans (``rag_lab.tracking.traces``); ``retriever_ms`` each retriever's own latency of
    the timed queries (the parts of ``latency_ms``).
    Over several sources (``sources=rules``, ``rag_lab.pipeline.sources``): ``routes`` is each
    query's routing (the route that decided and the sources searched; ``{}`` otherwise) and
    ``source_runs`` each source's own final run over every query; ``raw_runs``, with a fallback
    chain after the sources (``RoutedFallbackPipeline``), each stage's runs merged by raw score
    (each chunk keeps its own source's score): what level 0's acceptance judges.
    """

    queries: Mapping[str, str]
    runs: Mapping[str, Run]
    final: Run
    latency_ms: tuple[float, ...]
    from_cache: Mapping[str, bool]
    seconds: Mapping[str, float]
    stats: Mapping[str, float]
    fallback_level: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # what ``Annotating`` post-processors said about each query: {query_id: {name: value}}
    annotations: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    windows: Mapping[str, tuple[int, int]] = field(default_factory=lambda: MappingProxyType({}))
    retriever_ms: Mapping[str, tuple[float, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    routes: Mapping[str, Routing] = field(default_factory=lambda: MappingProxyType({}))
    source_runs: Mapping[str, Run] = field(default_factory=lambda: MappingProxyType({}))
    raw_runs: Mapping[str, Run] = field(default_factory=lambda: MappingProxyType({}))
