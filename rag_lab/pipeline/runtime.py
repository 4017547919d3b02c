"""What a run cost: stage timings, per-query latency percentiles, encoder throughput, cache
counters. Plain numbers for metrics.json and MLflow (``*_seconds`` and ``*_ms`` keys are
lower-is-better, see ``rag_lab.metrics.names``)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

import numpy as np

from rag_lab.pipeline.result import RetrievalResult


def _percentile(values: tuple[float, ...], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


def runtime_metrics(
    result: RetrievalResult, timings: Mapping[str, float], retrievers: list[str]
) -> dict[str, float]:
    """Timings of the corpus stages (``timings``: the pipeline's), of retrieval (``result``),
    latency percentiles, ``<retriever>/run_from_cache``, every stage's stats and the mean
    ``embed_docs_per_second`` of the dense retrievers that encoded."""
    out: dict[str, float] = {
        "parse_seconds": timings.get("parse_seconds", 0.0),
        "chunk_seconds": timings.get("chunk_seconds", 0.0),
        "index_seconds": sum(v for k, v in timings.items() if k.endswith("/index_seconds")),
        "query_transform_seconds": result.seconds["query_transforms"],
        "retrieve_seconds": sum(result.seconds[r] for r in retrievers),
        "fuse_seconds": result.seconds["after_retrieval"],
        "query_p50_ms": _percentile(result.latency_ms, 50),
        "query_p95_ms": _percentile(result.latency_ms, 95),
        **{f"{r}/run_from_cache": float(result.from_cache[r]) for r in retrievers},
        **result.stats,
    }
    rates = [v for k, v in result.stats.items() if k.endswith("embed_docs_per_second")]
    out["embed_docs_per_second"] = float(statistics.fmean(rates)) if rates else math.nan
    return out
