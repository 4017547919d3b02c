"""``report.html`` of a sweep folder: the leaderboard (bootstrap CIs, paired randomisation tests
against the winner, Holm-adjusted across configurations), the sweep plots, a category x
configuration table, and a per-query drill-down ordered by how much the configurations disagree,
with the winner's retrieved chunks beside the gold. One file, nothing fetched.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from rag_lab.analysis.runs import as_float, load_run, with_labels
from rag_lab.analysis.stats import align
from rag_lab.errors import ConfigError
from rag_lab.io.atomic import write_atomic
from rag_lab.io.yaml_text import load_own
from rag_lab.metrics.names import higher_is_better, metric_key
from rag_lab.report import html as h
from rag_lab.report.figures import png_data_uri
from rag_lab.report.leaderboard import (
    STAT_COLUMNS,
    Trial,
    config_label,
    format_value,
    leaderboard,
    plot_by_category,
    plot_metric_vs_params,
)
from rag_lab.report.run_page import REPORT_FILE, is_miss, query_details

TOP = 8  # configurations in the category table and the per-query columns
DEFAULT_METRIC = "ndcg_at_10"


def sweep_metric(sweep_dir: Path) -> str:
    """The sweep's ``optimized_metric`` (logged key) from Hydra's ``multirun.yaml``."""
    path = sweep_dir / "multirun.yaml"
    if path.is_file():
        cfg = load_own(path.read_text(encoding="utf-8")) or {}
        if cfg.get("optimized_metric"):
            return metric_key(str(cfg["optimized_metric"]))
    return DEFAULT_METRIC


def sweep_trials(sweep_dir: Path) -> list[Trial]:
    """The sweep's jobs (folders with Hydra's ``.hydra/`` record and a ``metrics.json``; the
    winner's report-split run is not a job), with only the params that vary."""
    from rag_lab.report.leaderboard import load_trials, varying

    if not sweep_dir.is_dir():
        raise ConfigError(f"{sweep_dir}: no such sweep folder")
    jobs = [t for t in load_trials(sweep_dir) if (sweep_dir / t.name / ".hydra").is_dir()]
    if not jobs:
        raise ConfigError(
            f"{sweep_dir}: no finished job (no <job>/metrics.json): not a sweep folder"
        )
    return varying(jobs)


def _params_cell(params: dict[str, Any]) -> h.Html:
    if not params:
        return h.Html('<span class="note">–</span>')
    return h.Html(
        "<br>".join(f"<code>{h.esc(k)}</code>={h.esc(format_value(v))}" for k, v in params.items())
    )


def leaderboard_section(board: pd.DataFrame, trials: list[Trial], metric: str, alpha: float) -> str:
    by_name = {t.name: t for t in trials}
    extra = [
        c
        for c in board.columns
        if c not in _BOARD_FIXED and c not in board.attrs.get("param_columns", []) and c != metric
    ]
    headers = [
        "rank",
        "job",
        "configuration",
        metric,
        "95% CI",
        "Δ vs winner",
        "p",
        "p (Holm)",
        "≈ winner",
        *extra,
    ]
    rows, classes = [], []
    for _, r in board.iterrows():
        mark = "winner" if r["rank"] == 1 else ("≈" if bool(r["indistinguishable"]) else "worse")
        rows.append(
            [
                int(r["rank"]),
                str(r["name"]),
                _params_cell(by_name[str(r["name"])].params),
                float(r[metric]),
                h.ci_text(float(r["ci_low"]), float(r["ci_high"])),
                float(r["delta_vs_winner"]),
                float(r["p_vs_winner"]),
                float(r["p_holm"]),
                mark,
                *(float(r[c]) for c in extra),
            ]
        )
        classes.append("best" if r["rank"] == 1 else ("" if r["indistinguishable"] else "sig"))
    numeric = [0, 3, 4, 5, 6, 7, *range(9, 9 + len(extra))]
    direction = "higher" if board.attrs.get("higher_is_better", True) else "lower"
    note = (
        f"ranked on per-query {metric} ({direction} is better). 95% CI: percentile bootstrap of "
        f"the mean; p: two-sided paired randomisation test against the winner on the queries "
        f"both scored; p (Holm): adjusted across the {len(board) - 1} comparisons; ≈ winner: "
        f"p (Holm) ≥ {alpha:g}, i.e. the data do not separate it from the best (not 'equal')."
    )
    return h.section(
        "Leaderboard",
        h.scroll(h.table(headers, rows, numeric=numeric, row_classes=classes, cls="board")),
        "leaderboard",
        note,
    )


_BOARD_FIXED = {"rank", "name", *STAT_COLUMNS}


def plots_section(trials: list[Trial], metric: str, pngs: list[Path] | None = None) -> str:
    """The sweep plots inline: ``pngs`` (those ``rag_lab.report.leaderboard.write_report`` wrote at
    the sweep's end) or, when none are given, drawn here."""
    if pngs is not None:
        figures = [h.figure(png_data_uri(p), p.stem.replace("_", " ")) for p in pngs]
    else:
        with tempfile.TemporaryDirectory(prefix="rag_lab_sweep_plots_") as tmp:
            paths = plot_metric_vs_params(trials, metric, Path(tmp), n_resamples=1000)
            by_cat = plot_by_category(trials, metric, Path(tmp), top=TOP)
            if by_cat is not None:
                paths.append(by_cat)
            figures = [h.figure(png_data_uri(p), p.stem.replace("_", " ")) for p in paths]
    if not figures:
        return ""
    return h.section("Plots", "".join(figures), "plots")


def category_section(board: pd.DataFrame, trials: list[Trial], metric: str) -> str:
    by_name = {t.name: t for t in trials}
    top = [by_name[str(n)] for n in board["name"].head(TOP)]
    tables = {
        t.name: t.per_query.groupby(t.per_query["category"].astype(str))[metric].mean()
        for t in top
        if "category" in t.per_query.columns and not t.per_query["category"].isna().all()
    }
    if not tables:
        return ""
    cats = sorted(set().union(*(set(s.index) for s in tables.values())))
    hib = bool(board.attrs.get("higher_is_better", True))
    rows = []
    for c in cats:
        values = [
            float(tables[t.name].get(c, math.nan)) if t.name in tables else math.nan for t in top
        ]
        finite = [v for v in values if not math.isnan(v)]
        best = (max if hib else min)(finite) if finite else math.nan
        rows.append(
            [
                c,
                *(
                    h.Html(f"<b>{h.fmt(v)}</b>") if v == best and len(finite) > 1 else v
                    for v in values
                ),
            ]
        )
    headers = ["category", *(f"{t.name}: {config_label(t, 40)}" for t in top)]
    return h.section(
        "By category",
        h.scroll(h.table(headers, rows, numeric=range(1, len(headers)))),
        "categories",
        f"per-category mean {metric} of the top {len(top)} configurations (best in bold)",
    )


def drilldown_section(
    sweep_dir: Path, board: pd.DataFrame, trials: list[Trial], metric: str
) -> str:
    by_name = {t.name: t for t in trials}
    top = [by_name[str(n)] for n in board["name"].head(TOP)]
    winner = top[0]
    wide = align({t.name: t.per_query for t in top}, metric)
    spread = (wide.max(axis=1) - wide.min(axis=1)).fillna(-1.0)
    order = spread.sort_values(ascending=False, kind="stable").index
    run = with_labels(load_run(sweep_dir / winner.name))
    rows_by_id = {str(r["query_id"]): r for r in winner.per_query.to_dict("records")}
    rows = []
    for qid in order:
        row = rows_by_id.get(str(qid))
        if row is None:
            continue
        scores = [(t.name, config_label(t, 40), as_float(wide.loc[qid, t.name])) for t in top]
        score_table = h.table(["job", "configuration", metric], scores, numeric=[2], cls="small")
        retrieved, gold = query_details(row, run.labels)
        body = (
            f"<div><h4>{h.esc(metric)} per configuration</h4>{score_table}"
            f"<h4>winner (job {h.esc(winner.name)}): retrieved</h4>{retrieved}</div>"
            f"<div><h4>gold</h4>{gold}</div>"
        )
        summary_scores = " ".join(h.fmt(v, 2) for _, _, v in scores)
        summary = [
            h.Html(f"<code>{h.esc(qid)}</code>"),
            str(row.get("category") or ""),
            str(row.get("text", "")),
            h.Html(f'<span class="scores">{h.esc(summary_scores)}</span>'),
        ]
        search = f"{qid} {row.get('category')} {row.get('text')}"
        rows.append(h.query_row(search, is_miss(row), summary, body))
    note = (
        f"queries where the top {len(top)} configurations disagree most on {metric} first; the "
        f"scores in each row are those configurations in leaderboard order. "
        + (run.labels_note or "")
    )
    return h.section(
        "Queries", h.filter_controls("winner misses only") + "".join(rows), "queries", note
    )


def render_sweep(
    sweep_dir: Path,
    alpha: float = 0.05,
    *,
    trials: list[Trial] | None = None,
    board: pd.DataFrame | None = None,
    plots: list[Path] | None = None,
) -> str:
    """The page's HTML. ``trials``, ``board`` and ``plots``: what the sweep's end has already
    computed (the callback, ``rag_lab.sweep.callback``), used instead of reading the jobs again
    (``trials``: as :func:`sweep_trials` reads them), ranking them again (``board``: their
    :func:`~rag_lab.report.leaderboard.leaderboard` on the sweep's metric at ``alpha``, no floors)
    or drawing the plots again (``plots``: the PNGs of ``<sweep>/report``)."""
    if trials is None:
        trials = sweep_trials(sweep_dir)
    metric = str(board.attrs["metric"]) if board is not None else sweep_metric(sweep_dir)
    if board is None:
        board = leaderboard(trials, metric, higher_is_better=higher_is_better(metric), alpha=alpha)
    info: list[tuple[str, Any]] = [
        ("sweep", str(sweep_dir)),
        ("configurations", len(trials)),
        ("objective", f"{metric} ({'higher' if higher_is_better(metric) else 'lower'} is better)"),
    ]
    first = load_run(sweep_dir / trials[0].name)
    info.append(("dataset / split", f"{first.dataset or '?'}/{first.split or '?'}"))
    winner_file = sweep_dir / "winner.json"
    if winner_file.is_file():
        winner = json.loads(winner_file.read_text(encoding="utf-8"))
        info.append(("winner", f"job {winner.get('job')}"))
        for key, value in sorted((winner.get("report") or {}).items()):
            if key == metric or key in ("hit_rate_at_5", "noise_ratio_at_5"):
                info.append((f"winner on the report split: {key}", as_float(value)))
    parts = [
        h.section("Sweep", h.definition_list(info), "sweep"),
        leaderboard_section(board, trials, metric, alpha),
        plots_section(trials, metric, plots),
        category_section(board, trials, metric),
        drilldown_section(sweep_dir, board, trials, metric),
    ]
    nav = [("sweep", "sweep"), ("leaderboard", "leaderboard"), ("plots", "plots")]
    nav += [("categories", "by category"), ("queries", "queries")]
    title = f"rag_lab sweep report: {first.dataset or '?'}/{first.split or '?'}, {metric}"
    return h.page(title, str(sweep_dir), nav, "".join(p for p in parts if p))


def write_sweep_report(sweep_dir: Path, alpha: float = 0.05, **computed: Any) -> Path:
    """Write ``<sweep_dir>/report.html`` and return its path (``computed``: :func:`render_sweep`'s
    ``trials`` / ``board`` / ``plots``). Raises :class:`ConfigError` when the folder holds no
    finished job."""
    sweep_dir = Path(sweep_dir)
    path = sweep_dir / REPORT_FILE
    write_atomic(path, render_sweep(sweep_dir, alpha, **computed))
    return path


__all__ = ["render_sweep", "write_sweep_report"]
