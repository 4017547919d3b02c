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


# keys whose values are counts: printed as integers
_COUNT_PREFIXES = ("n_", "cache_hits", "cache_misses", "cache/")


def _width(text: str) -> int:
    """Display width in terminal cells (a CJK character takes two)."""
    from wcwidth import wcswidth

    w = wcswidth(text)
    return w if w >= 0 else len(text)


def _pad(text: str, width: int, right: bool = False) -> str:
    fill = " " * max(width - _width(text), 0)
    return fill + text if right else text + fill


def _value(key: str, value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and key.startswith(_COUNT_PREFIXES):
        return str(int(value))
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def format_table(metrics: Mapping[str, Any], keys: Sequence[str]) -> str:
    """``key  value`` lines; keys the run lacks and values that are NaN (a stage the run did not
    have, e.g. an encoder rate in a BM25-only run) are left out."""
    shown = [
        k
        for k in keys
        if k in metrics and not (isinstance(metrics[k], float) and math.isnan(metrics[k]))
    ]
    width = max((_width(k) for k in shown), default=0)
    return "\n".join(f"  {_pad(k, width)}  {_value(k, metrics[k])}" for k in shown)


def category_table(metrics: Mapping[str, Any]) -> str:
    """One row per query category (names aligned by display width, so Chinese ones line up)."""
    cats = sorted({k.split("/")[1] for k in metrics if k.startswith("by_category/")})
    cols = [c for c in CATEGORY_COLUMNS if any(f"by_category/{cat}/{c}" in metrics for cat in cats)]
    if not cats or not cols:
        return ""
    first = max(14, *(_width(c) + 2 for c in cats))
    lines = ["  " + _pad("category", first) + "".join(f"{c:>18}" for c in cols)]
    for cat in cats:
        vals = [metrics.get(f"by_category/{cat}/{c}", math.nan) for c in cols]
        cells = "".join(_pad("-" if math.isnan(v) else f"{v:.3f}", 18, right=True) for v in vals)
        lines.append("  " + _pad(cat, first) + cells)
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
