"""The HTML page of ``rag-lab compare``: the metric differences ``B - A`` with their CIs, then
the queries that got better and worse, each with A's and B's retrieved chunks side by side and
the gold below. One file, nothing fetched."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.io.atomic import write_atomic
from rag_lab.report import html as h
from rag_lab.report.run_page import query_details

if TYPE_CHECKING:
    from rag_lab.analysis.compare import Comparison, QueryChange


def _metrics(result: Comparison) -> str:
    rows, classes = [], []
    for r in result.rows:
        verdict = {True: "B better", False: "B worse", None: "within noise"}[r.better]
        rows.append(
            [
                r.metric,
                r.a,
                r.b,
                h.Html(f"{r.delta:+.4f}"),
                h.ci_text(r.low, r.high),
                r.p_value,
                r.n,
                verdict,
            ]
        )
        classes.append({True: "best", False: "worse", None: ""}[r.better])
    body = h.table(
        ["metric", "A", "B", "B − A", "95% CI", "p", "queries", ""],
        rows,
        numeric=[1, 2, 3, 4, 5, 6],
        row_classes=classes,
    )
    note = (
        f"mean per-query difference over the queries both runs scored; "
        f"{100 * (1 - result.alpha):g}% paired bootstrap CI (queries resampled jointly); p: "
        "two-sided paired randomisation test; 'B better/worse': p < "
        f"{result.alpha:g}, in the metric's direction"
    )
    return h.section("Metrics", body, "metrics", note)


def _row(result: Comparison, change: QueryChange, depth: int) -> h.Html:
    a_rows = result.a.per_query.set_index("query_id")
    b_rows = result.b.per_query.set_index("query_id")
    a_row = {"query_id": change.query_id, **a_rows.loc[change.query_id].to_dict()}
    b_row = {"query_id": change.query_id, **b_rows.loc[change.query_id].to_dict()}
    a_ret, _ = query_details(a_row, result.a.labels, depth)
    b_ret, gold = query_details(b_row, result.b.labels, depth)
    body = (
        f"<div><h4>A: {h.esc(result.a.ref)}</h4>{a_ret}</div>"
        f"<div><h4>B: {h.esc(result.b.ref)}</h4>{b_ret}</div>"
        f'<div style="grid-column: 1 / -1"><h4>gold</h4>{gold}</div>'
    )
    scores = f"{result.metric} {change.a:.3f} → {change.b:.3f} ({change.delta:+.3f})"
    summary = [
        h.Html(f"<code>{h.esc(change.query_id)}</code>"),
        change.category,
        change.text,
        h.Html(f'<span class="scores">{h.esc(scores)}</span>'),
    ]
    search = f"{change.query_id} {change.category} {change.text}"
    return h.query_row(search, False, summary, body)


def render_compare(result: Comparison, depth: int = 10) -> str:
    info = [
        ("A", result.a.ref),
        ("B", result.b.ref),
        ("dataset / split", f"{result.b.dataset or '?'}/{result.b.split or '?'}"),
        ("dataset fingerprint", result.b.fingerprint or "–"),
        ("per-query metric", result.metric),
        ("queries better in B", len(result.better)),
        ("queries worse in B", len(result.worse)),
        ("unchanged", result.n_unchanged),
    ]
    parts = [h.section("Runs", h.definition_list(info), "runs"), _metrics(result)]
    note = result.a.labels_note or result.b.labels_note
    for anchor, title, group in (
        ("worse", "Worse in B", result.worse),
        ("better", "Better in B", result.better),
    ):
        rows = "".join(_row(result, c, depth) for c in group)
        parts.append(
            h.section(
                f"{title} ({len(group)})",
                rows or '<p class="note">none</p>',
                anchor,
                f"largest change in {result.metric} first; open a query for both rankings. " + note,
            )
        )
    nav = [("runs", "runs"), ("metrics", "metrics"), ("worse", "worse"), ("better", "better")]
    title = f"rag_lab compare: {result.metric}, B − A"
    return h.page(title, f"A = {result.a.ref} · B = {result.b.ref}", nav, "".join(parts))


def write_compare_report(result: Comparison, path: Path, depth: int = 10) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, render_compare(result, depth))
    return path
