"""``rag-lab compare RUN_A RUN_B``: what changed between two runs of the same split, query by
query (the command line is :mod:`rag_lab.cli.compare`; the HTML page
:mod:`rag_lab.report.compare_page`).

- Both runs must have scored the same data: the same dataset and split (from their resolved
  configs) and, where both carry one, the same dataset fingerprint; otherwise a one-line
  :class:`~rag_lab.errors.ConfigError` (exit 2).
- Each headline metric: the mean per-query difference ``B - A`` over the queries both scored,
  its paired bootstrap CI (:func:`rag_lab.analysis.stats.paired_bootstrap_diff_ci`) and a two-sided
  paired randomisation p-value (:func:`rag_lab.analysis.stats.randomization_test`).
- The queries that got better or worse on the primary metric (``optimized_metric`` of run B's
  config, else ``ndcg_at_10``), in the metric's own direction, largest changes first, with both
  runs' retrieved chunks (:func:`render_console` prints them side by side).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rag_lab.analysis.runs import RunView, headline, ids
from rag_lab.analysis.stats import align, paired_bootstrap_diff_ci, randomization_test
from rag_lab.errors import ConfigError
from rag_lab.metrics.names import higher_is_better, metric_key


@dataclass(frozen=True)
class MetricDiff:
    """One metric: means of A and B over the shared queries, ``delta = B - A``, its CI and p."""

    metric: str
    a: float
    b: float
    delta: float
    low: float
    high: float
    p_value: float
    n: int
    alpha: float = 0.05

    @property
    def better(self) -> bool | None:
        """Whether B is significantly better (True), worse (False) or neither (None): the
        randomisation test's ``p < alpha`` (the gate's rule; the percentile bootstrap CI of a
        few dozen 0/1 differences can exclude 0 while p does not reach alpha)."""
        if math.isnan(self.p_value) or self.p_value >= self.alpha or self.delta == 0:
            return None
        return (self.delta > 0) == higher_is_better(self.metric)


@dataclass(frozen=True)
class QueryChange:
    query_id: str
    text: str
    category: str
    a: float
    b: float
    delta: float  # B - A


# eq=False: RunView holds DataFrames
@dataclass(frozen=True, eq=False)
class Comparison:
    a: RunView
    b: RunView
    metric: str
    rows: list[MetricDiff]
    better: list[QueryChange]  # B improved, largest first
    worse: list[QueryChange]  # B regressed, largest first
    n_unchanged: int
    alpha: float


def _where(run: RunView) -> str:
    return f"{run.dataset or '?'}/{run.split or '?'}"


def check_same_data(a: RunView, b: RunView) -> None:
    """Refuse (one line) runs of different datasets or splits, or with different fingerprints."""
    if (a.dataset, a.split) != (b.dataset, b.split):
        raise ConfigError(
            f"refusing to compare: {a.ref} scored {_where(a)}, {b.ref} scored {_where(b)} "
            "(different datasets or splits)"
        )
    if a.fingerprint and b.fingerprint and a.fingerprint != b.fingerprint:
        raise ConfigError(
            f"refusing to compare: dataset fingerprints differ ({a.ref}: {a.fingerprint}, "
            f"{b.ref}: {b.fingerprint}): the runs scored different data"
        )


def primary_metric(a: RunView, b: RunView, metric: str | None) -> str:
    key = metric_key(metric) if metric else ""
    if not key and b.config and b.config.get("optimized_metric"):
        key = metric_key(str(b.config["optimized_metric"]))
    key = key or "ndcg_at_10"
    for run in (a, b):
        if key not in run.per_query.columns:
            raise ConfigError(f"{run.ref}: per_query.parquet has no column {key!r}")
    return key


def compare(
    a: RunView,
    b: RunView,
    metric: str | None = None,
    metrics: Sequence[str] | None = None,
    *,
    alpha: float = 0.05,
    n_resamples: int = 2000,
    n_permutations: int = 10000,
    seed: int = 0,
) -> Comparison:
    """Compare run ``b`` against run ``a`` (see the module docstring)."""
    check_same_data(a, b)
    primary = primary_metric(a, b, metric)
    if metrics is None:
        names = [m for m in headline(a.metrics, a.per_query) if m in b.per_query.columns]
        names = list(dict.fromkeys([primary, *names]))
    else:
        names = [metric_key(m) for m in metrics]
    shared = set(a.per_query["query_id"]) & set(b.per_query["query_id"])
    if not shared:
        raise ConfigError(f"refusing to compare: {a.ref} and {b.ref} share no query id")
    rows = []
    for m in names:
        pair = align({"a": a.per_query, "b": b.per_query}, m).to_numpy(dtype=np.float64)
        both = np.isfinite(pair).all(axis=1)
        delta, low, high = paired_bootstrap_diff_ci(
            pair[:, 1], pair[:, 0], n_resamples, alpha, seed
        )
        rows.append(
            MetricDiff(
                m,
                float(pair[both, 0].mean()) if both.any() else math.nan,
                float(pair[both, 1].mean()) if both.any() else math.nan,
                delta,
                low,
                high,
                randomization_test(pair[:, 1], pair[:, 0], n_permutations, seed),
                int(both.sum()),
                alpha,
            )
        )
    better, worse, unchanged = query_changes(a.per_query, b.per_query, primary)
    return Comparison(a, b, primary, rows, better, worse, unchanged, alpha)


def query_changes(
    a: pd.DataFrame, b: pd.DataFrame, metric: str
) -> tuple[list[QueryChange], list[QueryChange], int]:
    """(better, worse, number unchanged) on ``metric``, in its direction; largest change first,
    ties by query id. Queries where either side is undefined are left out."""
    wide = align({"a": a, "b": b}, metric).dropna()
    info = b.set_index("query_id")
    sign = 1.0 if higher_is_better(metric) else -1.0
    better: list[QueryChange] = []
    worse: list[QueryChange] = []
    for qid, (va, vb) in wide.iterrows():
        d = float(vb - va)
        if abs(d) <= 1e-12:
            continue
        row = info.loc[qid]
        change = QueryChange(
            str(qid),
            str(row.get("text", "")),
            str(row.get("category") or ""),
            float(va),
            float(vb),
            d,
        )
        (better if sign * d > 0 else worse).append(change)
    for group in (better, worse):
        group.sort(key=lambda c: (-abs(c.delta), c.query_id))
    return better, worse, len(wide) - len(better) - len(worse)


def retrieved(run: RunView, query_id: str) -> list[str]:
    """The run's retrieved chunk ids of one query, best first."""
    table = run.per_query
    hit = table.loc[table["query_id"] == query_id]
    if hit.empty or "retrieved_chunk_ids" not in table.columns:
        return []
    return ids(hit.iloc[0]["retrieved_chunk_ids"])


# ---------------------------------------------------------------------------------------------
# console


def _chunk_lines(run: RunView, query_id: str, depth: int, width: int) -> Any:
    from rich.text import Text

    out = Text()
    labels = run.labels
    grades = labels.qrels.get(query_id, {}) if labels else {}
    query = labels.queries.get(query_id) if labels else None
    from rag_lab.report.html import has_evidence

    for rank, cid in enumerate(retrieved(run, query_id)[:depth], start=1):
        chunk = labels.chunks.get(cid) if labels else None
        doc = chunk.doc_id if chunk else cid.split("#", 1)[0]
        marks = ""
        if grades.get(doc, 0) > 0:
            marks += " rel"
        if chunk is not None and has_evidence(chunk, query):
            marks += " ev"
        out.append(f"{rank:>2} ", style="bold")
        out.append(cid, style="cyan")
        out.append(marks, style="green")
        out.append("\n")
        if chunk is not None:
            snippet = " ".join(chunk.text.split())
            out.append("   " + (snippet[:width] + ("…" if len(snippet) > width else "")) + "\n")
    return out


_UNBOUNDED = 10_000  # columns offered to the metric table to measure the width it needs


def render_console(
    result: Comparison, console: Any = None, show: int = 5, depth: int = 5, width: int = 120
) -> None:
    """Print the comparison with rich: the metric table, then the ``show`` most improved and
    most regressed queries, each with A's and B's top ``depth`` chunks side by side (chunk
    texts shortened to ``width`` characters; ``rel``: chunk of a relevant document, ``ev``:
    contains a gold string). Corpus text is printed as plain text, never as rich markup.

    Where the output is not a terminal (a pipe, a file, CI's log), rich assumes 80 columns and
    would cut the table's numbers to ``0.6…``: the metric table is printed at the width it
    needs, so every number is whole."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()
    a, b = result.a, result.b
    console.print(Text(f"A: {a.ref}\nB: {b.ref}\n{_where(b)}", style="bold"))
    table = Table(
        title=f"B - A over shared queries ({100 * (1 - result.alpha):g}% paired bootstrap CI)"
    )
    for col in ("metric", "A", "B", "B - A", "CI", "p", "queries"):
        table.add_column(col, justify="left" if col == "metric" else "right", no_wrap=True)
    for r in result.rows:
        style = {True: "green", False: "red", None: ""}[r.better]
        table.add_row(
            Text(r.metric),
            f"{r.a:.4f}",
            f"{r.b:.4f}",
            Text(f"{r.delta:+.4f}", style=style),
            f"[{r.low:+.4f}, {r.high:+.4f}]",
            f"{r.p_value:.4f}",
            str(r.n),
        )
    if console.is_terminal:
        console.print(table)
    else:  # a pipe has no width to fit: the whole numbers, however long the metric names
        # (print(width=...) is capped at the console's width: widen the console for the table)
        width = console.width
        wide = console.options.update_width(_UNBOUNDED)
        console.width = max(width, console.measure(table, options=wide).maximum)
        try:
            console.print(table)
        finally:
            console.width = width
    console.print(
        f"{result.metric}: {len(result.better)} queries better in B, {len(result.worse)} worse, "
        f"{result.n_unchanged} unchanged"
    )
    for title, group in (("better in B", result.better), ("worse in B", result.worse)):
        for change in group[:show]:
            side = Table(
                title=Text(
                    f"{title}: {change.query_id} [{change.category}] {change.text}  "
                    f"{result.metric} {change.a:.3f} → {change.b:.3f} ({change.delta:+.3f})"
                ),
                show_lines=False,
                expand=True,
            )
            side.add_column("A", ratio=1, overflow="fold")
            side.add_column("B", ratio=1, overflow="fold")
            side.add_row(
                _chunk_lines(a, change.query_id, depth, width),
                _chunk_lines(b, change.query_id, depth, width),
            )
            console.print(side)
    note = a.labels_note or b.labels_note
    if note:
        console.print(Text(note, style="dim"))


__all__ = [
    "Comparison",
    "MetricDiff",
    "QueryChange",
    "check_same_data",
    "compare",
    "query_changes",
    "render_console",
]
