"""``report.html`` of one evaluate run: headline metrics with bootstrap CIs, counts and timings,
per-category table and plot, why queries missed, and a per-query drill-down (retrieved chunks
beside the gold evidence), worst queries first. One file, nothing fetched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_lab.analysis.runs import (
    Labels,
    RunView,
    as_float,
    headline,
    ids,
    load_run,
    metric_cis,
    with_labels,
)
from rag_lab.analysis.stats import paired_bootstrap_ci
from rag_lab.io.atomic import write_atomic
from rag_lab.io.run_folder import REPORT_FILE
from rag_lab.metrics.names import metric_key
from rag_lab.report import html as h
from rag_lab.report.figures import cached_png, subplots

DEPTH = 10  # retrieved chunks shown per query
MISS_COLUMNS = ("miss_reason_at_5", "evidence_miss_reason_at_5")
_HITS = {"", "hit", "evidence_hit", "None", "nan"}
SUMMARY_KEYS = (
    "n_queries",
    "n_answerable",
    "n_unanswerable",
    "n_documents",
    "n_chunks",
    "index_seconds",
    "query_p50_ms",
    "query_p95_ms",
    "queries_per_second",
    "total_seconds",
    "cache_hits",
    "cache_misses",
)


def primary_metric(run: RunView, names: Sequence[str]) -> str:
    """The run's ``optimized_metric`` (logged key) when it has per-query scores, else the first
    headline metric."""
    configured = run.config.get("optimized_metric") if run.config else None
    key = metric_key(str(configured)) if configured else ""
    if key in run.per_query.columns:
        return key
    return names[0] if names else ""


def is_miss(row: Mapping[str, Any]) -> bool:
    """The query missed at 5 (documents or evidence), by the attribution columns."""
    return any(str(row.get(c, "") or "") not in _HITS for c in MISS_COLUMNS)


def pipeline_summary(config: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """``(stage, what)`` of the configured stages: the class each ``_target_`` names."""
    if not config:
        return []

    def target(node: Any) -> str:
        if isinstance(node, Mapping) and "_target_" in node:
            return str(node["_target_"]).rsplit(".", 1)[-1]
        if isinstance(node, Mapping) and node:
            return ", ".join(f"{k}: {target(v)}" for k, v in node.items())
        return "–" if node in (None, {}, []) else str(node)

    out = []
    for stage in (
        "chunker",
        "tokenizer",
        "embedder",
        "retrievers",
        "fusion",
        "reranker",
        "postprocess",
        "generator",
        "judge",
    ):
        if stage in config and config[stage] not in (None, {}, []):
            out.append((stage, target(config[stage])))
    embedder = config.get("embedder")
    if isinstance(embedder, Mapping) and embedder.get("model"):
        out.append(("embedder model", str(embedder["model"])))
    return out


# ---------------------------------------------------------------------------------------------
# parts


def metrics_section(run: RunView, names: Sequence[str]) -> str:
    cis = metric_cis(run.per_query, names)
    rows = []
    for m in names:
        mean, low, high = cis[m]
        n = int(np.isfinite(run.per_query[m].to_numpy(dtype=np.float64)).sum())
        rows.append((m, mean, low, high, n))
    board = h.table(
        ["metric", "mean", "95% CI low", "95% CI high", "queries scored"],
        rows,
        numeric=[1, 2, 3, 4],
    )
    counts = [(k, h.rounded(k, run.metrics[k])) for k in SUMMARY_KEYS if k in run.metrics]
    return h.section(
        "Headline metrics",
        board + h.definition_list(counts),
        "metrics",
        "percentile bootstrap over queries (2,000 resamples); ranking metrics average over "
        "answerable queries, noise ratio over all",
    )


def category_table(per_query: pd.DataFrame, names: Sequence[str]) -> tuple[list[str], list[list]]:
    if "category" not in per_query.columns or per_query["category"].isna().all():
        return [], []
    groups = per_query.groupby(per_query["category"].astype(str), sort=True)
    rows = []
    for cat, part in groups:
        rows.append([cat, len(part), *(float(part[m].mean()) for m in names)])
    return ["category", "queries", *names], rows


def _values(per_query: pd.DataFrame, columns: Sequence[str]) -> list[Any]:
    """The columns a figure draws, as its cache key (``rag_lab.report.figures.cached_png``)."""
    out: list[Any] = []
    for c in columns:
        col = per_query[c]
        out.append(
            col.to_numpy(dtype=np.float64)
            if col.dtype.kind in "fiub"
            else [None if v is None or (isinstance(v, float) and v != v) else v for v in col]
        )
    return out


def category_figure(per_query: pd.DataFrame, names: Sequence[str]) -> str | None:
    """Grouped bars: per-category mean of up to three metrics, with bootstrap CI bars."""
    if "category" not in per_query.columns or per_query["category"].isna().all():
        return None
    shown = list(names)[:3]
    data = (shown, _values(per_query, ["category", *shown]))
    return cached_png(
        "run_by_category", data, lambda: _category_figure(per_query, shown), bbox_inches="tight"
    )


def _category_figure(per_query: pd.DataFrame, shown: list[str]) -> Any:
    cats = sorted(per_query["category"].dropna().astype(str).unique())
    stats = np.array(
        [
            [
                paired_bootstrap_ci(
                    per_query.loc[per_query["category"].astype(str) == c, m].to_numpy(
                        dtype=np.float64
                    ),
                    1000,
                )
                for c in cats
            ]
            for m in shown
        ]
    )  # (metric, category, 3)
    keep = np.isfinite(stats[:, :, 0]).any(axis=0)
    if not keep.any():
        return None
    cats = [c for c, k in zip(cats, keep, strict=True) if k]
    stats = stats[:, keep, :]
    # one panel per metric, stacked, at the page's width (1,200 px at 100 dpi): 13 categories x
    # 3 metrics in one ~620 px panel had ~5 px labels
    width = min(12.0, max(6.4, 0.7 * len(cats) + 1.5))
    fig, axes = subplots(figsize=(width, 2.3 * len(shown) + 0.4), nrows=len(shown))
    axes = np.atleast_1d(axes)
    x = np.arange(len(cats))
    rotation = 30 if max(len(c) for c in cats) > 8 else 0
    for j, (m, ax) in enumerate(zip(shown, axes, strict=True)):
        mean = stats[j, :, 0]
        err = np.clip(np.stack([mean - stats[j, :, 1], stats[j, :, 2] - mean]), 0, None)
        ax.bar(x, np.nan_to_num(mean), 0.6, yerr=np.nan_to_num(err), capsize=3, color=f"C{j}")
        ax.set_xticks(x, cats if j == len(shown) - 1 else [""] * len(cats), rotation=rotation)
        ax.set_ylim(0, 1.0)
        ax.set_ylabel(m, fontsize="small")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_title("by category (95% bootstrap CI)")
    fig.tight_layout()
    return fig


def miss_figure(per_query: pd.DataFrame) -> str | None:
    """Horizontal bars: how many queries each miss reason covers (at 5)."""
    cols = [c for c in MISS_COLUMNS if c in per_query.columns]
    data = (cols, _values(per_query, cols))
    return cached_png("run_misses", data, lambda: _miss_figure(per_query, cols))


def _miss_figure(per_query: pd.DataFrame, cols: list[str]) -> Any:
    counts: dict[str, int] = {}
    for c in cols:
        for reason, n in per_query[c].fillna("").astype(str).value_counts().items():
            if reason and reason not in _HITS:
                side = "evidence" if c.startswith("evidence") else "documents"
                counts[f"{side}: {reason.removeprefix('evidence_')}"] = int(n)
    if not counts:
        return None
    items = sorted(counts.items(), key=lambda kv: kv[1])
    fig, ax = subplots(figsize=(6.4, 0.35 * len(items) + 1.2))
    ax.barh([k for k, _ in items], [v for _, v in items], color="C3")
    ax.set_xlabel("queries")
    ax.set_title("why queries missed at 5")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def query_details(
    row: Mapping[str, Any], labels: Labels | None, depth: int = DEPTH
) -> tuple[str, str]:
    """(retrieved, gold) HTML of one per-query row."""
    qid = str(row["query_id"])
    chunk_ids = ids(row.get("retrieved_chunk_ids"))
    doc_ids = ids(row.get("retrieved_doc_ids"))
    chunks = labels.chunks if labels else None
    query = labels.queries.get(qid) if labels else None
    grades = {d: float(g) for d, g in (labels.qrels.get(qid, {}) if labels else {}).items()}
    doc_ranks = {d: i for i, d in reversed(list(enumerate(doc_ids, start=1)))}
    chunk_ranks = {c: i for i, c in reversed(list(enumerate(chunk_ids, start=1)))}
    retrieved = h.ranking(chunk_ids, chunks, query, grades, depth)
    gold = h.gold(query, grades, doc_ranks, chunks, chunk_ranks)
    return retrieved, gold


def drilldown_section(run: RunView, primary: str, names: Sequence[str]) -> str:
    table = run.per_query
    order = table[primary].astype(np.float64).fillna(math.inf).sort_values(kind="stable").index
    shown = [m for m in (primary, "hit_rate_at_5", "evidence_hit_rate_at_5") if m in table]
    shown = list(dict.fromkeys(shown))
    rows = []
    for i in order:
        row = table.loc[i].to_dict()
        retrieved, gold = query_details(row, run.labels)
        reasons = [str(row.get(c) or "") for c in MISS_COLUMNS if str(row.get(c) or "")]
        scores = " · ".join(f"{m} {h.fmt(as_float(row.get(m)), 3)}" for m in shown)
        summary = [
            h.Html(f"<code>{h.esc(row['query_id'])}</code>"),
            str(row.get("category") or ""),
            str(row.get("text", "")),
            h.Html(f'<span class="scores">{h.esc(scores)}</span>'),
        ]
        body = (
            f"<div><h4>retrieved (top {DEPTH})</h4>{retrieved}</div>"
            f'<div><h4>gold</h4><p class="note">{h.esc(", ".join(reasons))}</p>{gold}</div>'
        )
        search = " ".join(
            str(x) for x in (row["query_id"], row.get("category"), row.get("text"), *reasons)
        )
        rows.append(h.query_row(search, is_miss(row), summary, body))
    note = f"worst {primary} first; click a query to open it."
    if run.labels_note:
        note += f" {run.labels_note}"
    return h.section("Queries", h.filter_controls() + "".join(rows), "queries", note)


def render_run(run: RunView, title: str | None = None) -> str:
    """The whole page of ``run`` (its labels should be set: :func:`rag_lab.analysis.runs.
    with_labels`)."""
    names = headline(run.metrics, run.per_query)
    primary = primary_metric(run, names)
    if primary and primary not in names:
        names = [primary, *names]
    where = f"{run.dataset or '?'}/{run.split or '?'}"
    info = [
        ("run", run.ref),
        ("dataset / split", where),
        ("dataset fingerprint", run.fingerprint or "–"),
        ("MLflow run", run.mlflow_run_id or "–"),
        *pipeline_summary(run.config),
    ]
    parts: list[str] = [h.section("Run", h.definition_list(info), "run")]
    parts.append(metrics_section(run, names))
    headers, rows = category_table(run.per_query, names)
    figures = []
    plotted = [primary, "hit_rate_at_5", "evidence_hit_rate_at_5"]
    cat_fig = category_figure(run.per_query, [m for m in dict.fromkeys(plotted) if m in names])
    if cat_fig:
        figures.append(h.figure(cat_fig, "per-category means", wide=True))
    miss_fig = miss_figure(run.per_query)
    if miss_fig:
        figures.append(h.figure(miss_fig, "miss reasons"))
    if rows:
        parts.append(
            h.section(
                "By category",
                h.scroll(h.table(headers, rows, numeric=range(1, len(headers)))),
                "categories",
                "per-query means within each category (– : not defined, e.g. ranking metrics "
                "of unanswerable queries)",
            )
        )
    if figures:
        parts.append(h.section("Plots", "".join(figures), "plots"))
    parts.append(drilldown_section(run, primary, names))
    nav = [("run", "run"), ("metrics", "metrics"), ("categories", "by category")]
    nav += [("plots", "plots"), ("queries", "queries")]
    return h.page(title or f"rag_lab run report: {where}", run.ref, nav, "".join(parts))


def write_run_report(run_dir: Path, labels: Labels | None = None) -> Path:
    """Write ``<run_dir>/report.html`` and return its path.

    ``labels`` (chunks, queries, qrels) are what ``evaluate`` already holds; without them they
    are rebuilt from ``config_resolved.yaml`` (:func:`rag_lab.analysis.runs.with_labels`)."""
    run_dir = Path(run_dir)
    run = with_labels(load_run(run_dir), labels)
    path = run_dir / REPORT_FILE
    write_atomic(path, render_run(run))
    return path


__all__ = ["REPORT_FILE", "render_run", "write_run_report"]
