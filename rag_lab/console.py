"""What ``rag-lab evaluate`` prints on stdout: the headline metrics, a per-category table and
where the outputs went (logs go to stderr)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.metrics.names import metric_key

RUN_SUMMARY = (
    "n_queries",
    "n_unanswerable",
    "index_seconds",
    "query_p50_ms",
    "query_p95_ms",
    "embed_docs_per_second",
    "cache_hits",
    "cache_misses",
)
CATEGORY_COLUMNS = ("hit_rate_at_5", "noise_ratio_at_5", "ndcg_at_10")


def format_table(metrics: Mapping[str, Any], keys: Sequence[str]) -> str:
    width = max((len(k) for k in keys), default=0)
    return "\n".join(
        f"  {k:<{width}}  {metrics[k]:.4f}"
        if isinstance(metrics[k], float)
        else f"  {k:<{width}}  {metrics[k]}"
        for k in keys
        if k in metrics
    )


def category_table(metrics: Mapping[str, Any]) -> str:
    cats = sorted({k.split("/")[1] for k in metrics if k.startswith("by_category/")})
    cols = [c for c in CATEGORY_COLUMNS if any(f"by_category/{cat}/{c}" in metrics for cat in cats)]
    if not cats or not cols:
        return ""
    lines = ["  " + f"{'category':<14}" + "".join(f"{c:>18}" for c in cols)]
    for cat in cats:
        vals = [metrics.get(f"by_category/{cat}/{c}", math.nan) for c in cols]
        lines.append("  " + f"{cat:<14}" + "".join(f"{v:>18.3f}" for v in vals))
    return "\n".join(lines)


def title(dataset: str, split: str, pipe: Any) -> str:
    """``<dataset>/<split>  retrievers=[...]  fusion=<class>`` for a pipeline."""
    fusion = type(pipe.fusion).__name__ if pipe.fusion else None
    return f"{dataset}/{split}  retrievers={list(pipe.retrievers)}  fusion={fusion}"


def run_summary(title: str, metrics: Mapping[str, Any], names: Sequence[str]) -> str:
    """The configured metrics, evidence and answer metrics, then the run's counts and costs."""
    keys = [metric_key(n) for n in names]
    keys += [k for k in metrics if k.startswith(("evidence_", "answer/"))]
    keys += list(RUN_SUMMARY)
    parts = [f"\n{title}\n{format_table(metrics, keys)}"]
    cats = category_table(metrics)
    if cats:
        parts.append(f"\n{cats}")
    return "\n".join(parts)
