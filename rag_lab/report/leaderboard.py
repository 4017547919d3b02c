"""Leaderboard, significance marks and plots for a finished sweep.

A sweep is a list of :class:`Trial` (one evaluated configuration each: its swept overrides, its
``metrics.json`` and its ``per_query.parquet``). The leaderboard ranks trials on one metric and
says, for each, whether it is distinguishable from the winner: a paired randomisation test over
the per-query scores of the queries both trials answered (see :mod:`rag_lab.analysis.stats`), with
the p-values Holm-adjusted across the trials compared with the winner (the family-wise error rate
stays at ``alpha`` however many configurations a sweep has). "≈ winner" means "the data do not
separate this trial from the best", not "equal". "Best" follows the metric's direction
(``rag_lab.metrics.names.higher_is_better``) unless a caller says otherwise.

Params are typed as Hydra parses them (:func:`parse_overrides`: ``fusion.k=60`` is the int 60,
``fusion.weights.dense=0.7`` a float), so numeric params plot on a sorted numeric axis.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_lab.analysis.stats import align, holm, paired_bootstrap_ci, randomization_test
from rag_lab.io.atomic import write_atomic
from rag_lab.io.run_folder import read_metrics
from rag_lab.io.yaml_text import load_own

# HEADLINE: the metrics.json keys shown next to the ranked one (those present in any trial)
from rag_lab.metrics.names import HEADLINE, meets_floors
from rag_lab.metrics.names import higher_is_better as _higher_is_better
from rag_lab.report.figures import cached_files
from rag_lab.report.figures import subplots as _subplots

STAT_COLUMNS = (
    "ci_low",
    "ci_high",
    "delta_vs_winner",
    "p_vs_winner",
    "p_holm",
    "indistinguishable",
    "meets_floors",
)
_LEADERBOARD_KW = frozenset(
    {"higher_is_better", "alpha", "n_resamples", "n_permutations", "seed", "floors"}
)
_CI_KW = frozenset({"higher_is_better", "alpha", "n_resamples", "seed"})


# eq=False: DataFrame fields make == ambiguous; trials compare by identity
@dataclass(frozen=True, eq=False)
class Trial:
    """One evaluated configuration of a sweep.

    ``params`` holds only the swept overrides (e.g. ``{"fusion": "rrf", "fusion.k": 60}``),
    ``metrics`` the flat ``metrics.json`` and ``per_query`` the ``per_query.parquet`` table, which
    must have a ``query_id`` column and one column per per-query metric."""

    name: str
    params: dict[str, Any]
    metrics: dict[str, float]
    per_query: pd.DataFrame


# ---------------------------------------------------------------------------------------------
# params


def parse_overrides(overrides: Sequence[str]) -> dict[str, Any]:
    """``{key: value}`` of a job's ``.hydra/overrides.yaml`` lines, typed by Hydra's own override
    grammar: ints, floats, bools and null as Python values, strings unquoted and unescaped
    (``tracking.uri=sqlite\\:////x`` → ``sqlite:////x``), lists and dicts as written
    (``[dense,bm25]``). ``+``/``~`` prefixes are dropped, ``hydra.*`` keys skipped; a line the
    grammar refuses is kept as its raw text after ``=``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    out: dict[str, Any] = {}
    for line in overrides:
        key, sep, raw = str(line).partition("=")
        key = key.lstrip("+~")
        if not sep or key.startswith("hydra.") or key.startswith("hydra/"):
            continue
        try:
            (override,) = parser.parse_overrides([str(line)])
            value = override.value()
            if not (value is None or isinstance(value, (bool, int, float, str))):
                value = override.get_value_element_as_str()
        except HydraException:
            value = raw
        out[key] = value
    return out


def format_value(value: Any) -> str:
    """A param value for a label or table cell: floats with 4 significant digits (``0.1915``, not
    ``0.1915194503788923``), everything else as written."""
    if isinstance(value, (float, np.floating)) and not isinstance(value, bool):
        return f"{float(value):.4g}"
    return str(value)


def config_label(trial: Trial, max_chars: int = 60) -> str:
    """What a legend calls a trial: its swept params (``fusion=rrf, fusion.k=60``), else its job
    name; cut to ``max_chars``."""
    if not trial.params:
        return trial.name
    text = ", ".join(f"{k}={format_value(v)}" for k, v in trial.params.items())
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


# ---------------------------------------------------------------------------------------------
# leaderboard


def _check(trials: Sequence[Trial], metric: str) -> None:
    if not trials:
        raise ValueError("no trials to report on")
    names = [t.name for t in trials]
    if len(set(names)) != len(names):
        raise ValueError(f"trial names must be unique, got {names}")
    for t in trials:
        if metric not in t.per_query.columns:
            raise KeyError(f"trial {t.name!r}: per_query table has no column {metric!r}")


def _param_names(trials: Sequence[Trial]) -> list[str]:
    """Union of the swept parameter names, in first-seen order (so the sweep's own order is
    kept)."""
    return list(dict.fromkeys(k for t in trials for k in t.params))


def _summaries(
    trials: Sequence[Trial], metric: str, n_resamples: int, alpha: float, seed: int
) -> np.ndarray:
    """``(n_trials, 3)`` array of (mean, CI low, CI high) of each trial's per-query ``metric``."""
    return np.array(
        [
            paired_bootstrap_ci(
                t.per_query[metric].to_numpy(dtype=np.float64), n_resamples, alpha, seed
            )
            for t in trials
        ],
        dtype=np.float64,
    ).reshape(len(trials), 3)


def _direction(metric: str, higher_is_better: bool | None) -> bool:
    """The caller's direction, else the metric's own."""
    return _higher_is_better(metric) if higher_is_better is None else bool(higher_is_better)


def _order(means: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Trial indices best first; NaN means last; ties keep the input order (stable sort)."""
    key = -means if higher_is_better else means.copy()
    key[np.isnan(key)] = np.inf
    return np.argsort(key, kind="stable")


def _column_names(params: list[str], metric: str, headline: list[str]) -> dict[str, str]:
    """Column of each swept param: its own name unless that clashes with a fixed column."""
    reserved = {"rank", "name", metric, *STAT_COLUMNS, *headline}
    return {p: (f"param:{p}" if p in reserved else p) for p in params}


def leaderboard(
    trials: Sequence[Trial],
    metric: str,
    higher_is_better: bool | None = None,
    alpha: float = 0.05,
    n_resamples: int = 2000,
    n_permutations: int = 5000,
    seed: int = 0,
    floors: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """One row per trial, best first, ranked on the per-query mean of ``metric``
    (``higher_is_better`` None: the metric's own direction, ``rag_lab.metrics.names``).
    With ``floors`` (``sweep.floors``: ``{metric: minimum}``) the trials that meet every floor
    come first, as the sweep's winner pick does (``rag_lab.metrics.names.objective_value``), and
    a ``meets_floors`` column says which do.

    Columns: ``rank``, ``name``, one per swept param (missing -> None), ``metric`` (per-query
    mean, NaN skipped: the ``metrics.json`` value), ``ci_low``/``ci_high`` (``1 - alpha``
    percentile bootstrap), ``delta_vs_winner`` (mean per-query ``trial - winner`` over shared
    queries where both are defined), ``p_vs_winner`` (two-sided paired randomisation test on the
    same pairs; 1.0 for the winner, NaN if no pair), ``p_holm`` (``p_vs_winner`` Holm-adjusted
    across the non-winning trials; 1.0 for the winner), ``indistinguishable`` (``p_holm >=
    alpha``: False where no pair gave a p-value; True for the winner), then the :data:`HEADLINE`
    keys of ``metrics.json`` present in any trial (NaN where a trial lacks one). ``metric`` is
    the ``metrics.json`` key, which is also the per-query column name. ``board.attrs`` records
    metric, alpha, higher_is_better and the param columns for :func:`to_markdown`. Raises
    ``KeyError`` if a per-query table lacks ``metric``."""
    higher_is_better = _direction(metric, higher_is_better)
    _check(trials, metric)
    stats = _summaries(trials, metric, n_resamples, alpha, seed)
    meets = [meets_floors(t.metrics, floors or {}) for t in trials]
    order = _order(stats[:, 0], higher_is_better)
    order = np.array([i for i in order if meets[i]] + [i for i in order if not meets[i]])
    winner = trials[order[0]]
    headline = [h for h in HEADLINE if h != metric and any(h in t.metrics for t in trials)]
    param_cols = _column_names(_param_names(trials), metric, headline)
    rows: list[dict[str, Any]] = []
    for rank, i in enumerate(order, start=1):
        trial = trials[i]
        if trial is winner:
            delta, p = 0.0, 1.0
        else:
            # fixed keys: trial names are free text and could collide with align's columns
            pair = align({"trial": trial.per_query, "winner": winner.per_query}, metric).to_numpy()
            diff = pair[:, 0] - pair[:, 1]
            diff = diff[np.isfinite(diff)]
            delta = float(diff.mean()) if diff.size else math.nan
            p = randomization_test(pair[:, 0], pair[:, 1], n_permutations, seed)
        rows.append(
            {
                "rank": rank,
                "name": trial.name,
                **{col: trial.params.get(p_name) for p_name, col in param_cols.items()},
                metric: stats[i, 0],
                "ci_low": stats[i, 1],
                "ci_high": stats[i, 2],
                "delta_vs_winner": delta,
                "p_vs_winner": p,
                "p_holm": 1.0 if trial is winner else math.nan,
                "indistinguishable": True,
                **({"meets_floors": meets[i]} if floors else {}),
                **{h: float(trial.metrics.get(h, math.nan)) for h in headline},
            }
        )
    # the family: every trial compared with the winner (the winner's own 1.0 is no test)
    adjusted = holm(np.array([r["p_vs_winner"] for r in rows[1:]], dtype=np.float64))
    for row, p_adj in zip(rows[1:], adjusted, strict=True):
        row["p_holm"] = float(p_adj)
        row["indistinguishable"] = bool(p_adj >= alpha)
    board = pd.DataFrame(rows)
    board.attrs.update(
        metric=metric,
        alpha=alpha,
        higher_is_better=higher_is_better,
        param_columns=list(param_cols.values()),
    )
    return board


# ---------------------------------------------------------------------------------------------
# markdown


def _cell(value: Any, is_param: bool) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (float, np.floating)):
        # params with 4 significant digits (0.3, 1e-05, 0.1915), scores at a fixed 4 decimals
        return format_value(value) if is_param else f"{value:.4f}"
    # a literal pipe would end the cell
    return str(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(board: pd.DataFrame, metric: str) -> str:
    """GitHub-flavoured Markdown table of a :func:`leaderboard`, followed by a legend line.

    Scores print with 4 decimals, params as configured, NaN as "–"; numeric columns are
    right-aligned. The ``indistinguishable`` column becomes "≈ winner" (``≈`` where p_holm >=
    alpha, "winner" on rank 1). Works on a board read back from CSV too (attrs then default to
    alpha = 0.05, params = columns between ``name`` and ``metric``)."""
    alpha = board.attrs.get("alpha", 0.05)
    cols = list(board.columns)
    if "param_columns" in board.attrs:
        params = set(board.attrs["param_columns"])
    elif "name" in cols and metric in cols:
        params = set(cols[cols.index("name") + 1 : cols.index(metric)])
    else:
        params = set()
    headers, body = [], []
    for col in cols:
        values = board[col].tolist()
        if col == "indistinguishable":
            ranks = board["rank"].tolist() if "rank" in cols else [None] * len(values)
            headers.append("≈ winner")
            body.append(
                [
                    "winner" if r == 1 else ("≈" if bool(v) else "")
                    for r, v in zip(ranks, values, strict=True)
                ]
            )
        else:
            headers.append(col)
            body.append([_cell(v, col in params) for v in values])
    numeric = [
        pd.api.types.is_numeric_dtype(board[c]) and not pd.api.types.is_bool_dtype(board[c])
        for c in cols
    ]
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---:" if num else "---" for num in numeric) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in zip(*body, strict=True)]
    hib = board.attrs.get("higher_is_better", _higher_is_better(metric))
    direction = "higher" if hib else "lower"
    legend = (
        f"≈ winner: not significantly different from the rank-1 trial on per-query {metric} "
        f"(two-sided paired randomisation test, Holm-adjusted across the {len(board) - 1} "
        f"comparisons: p_holm ≥ {alpha:g}). "
        f"ci_low/ci_high: {100 * (1 - alpha):g}% percentile bootstrap CI of the mean; "
        f"delta_vs_winner: mean per-query difference to the winner ({direction} is better)."
    )
    return "\n".join(lines) + "\n\n" + legend + "\n"


# ---------------------------------------------------------------------------------------------
# plots


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "param"


def _is_numeric(values: list[Any]) -> bool:
    # bools are ints to Python but on/off switches to a reader: plot them as categories
    return all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
        for v in values
    )


def _yerr(stats: np.ndarray) -> np.ndarray:
    """Asymmetric error bars (2, n) from (mean, low, high) rows; clipped at 0 for matplotlib."""
    return np.clip(np.stack([stats[:, 0] - stats[:, 1], stats[:, 2] - stats[:, 0]]), 0.0, None)


def _best_per_value(keys: list[Any], means: np.ndarray, higher_is_better: bool) -> dict[Any, float]:
    best: dict[Any, float] = {}
    pick = max if higher_is_better else min
    for k, m in zip(keys, means, strict=True):
        best[k] = pick(best[k], m) if k in best else m
    return best


def _plot_numeric(ax: Any, values: list[Any], stats: np.ndarray, higher_is_better: bool) -> None:
    x = np.asarray(values, dtype=np.float64)
    ax.errorbar(
        x, stats[:, 0], yerr=_yerr(stats), fmt="o", capsize=3, alpha=0.7, label="trial (CI)"
    )
    # other params vary too, so several trials can share a value: the line follows the best one
    best = _best_per_value(list(x), stats[:, 0], higher_is_better)
    xs = np.array(sorted(best))
    ax.plot(xs, [best[v] for v in xs], "-", color="C1", label="best per value")
    if xs[0] > 0 and xs[-1] / xs[0] >= 100:
        ax.set_xscale("log")  # e.g. fusion.k or top-k spanning decades
    if len(xs) <= 8:  # a grid: a tick at each value tried, labelled as a person would write it
        ax.set_xticks(xs, [format_value(float(v)) for v in xs])
        ax.minorticks_off()
    ax.legend(fontsize="small")


def _plot_categorical(
    ax: Any, values: list[Any], stats: np.ndarray, higher_is_better: bool
) -> None:
    labels = [format_value(v) for v in values]
    cats = list(dict.fromkeys(labels))
    best = _best_per_value(labels, stats[:, 0], higher_is_better)
    ax.bar(
        range(len(cats)), [best[c] for c in cats], width=0.6, color="C0", alpha=0.2, label="best"
    )
    # strip: spread a category's trials evenly across the bar instead of random jitter
    # (reproducible)
    slot = {c: 0 for c in cats}
    count = {c: labels.count(c) for c in cats}
    x = np.empty(len(labels))
    for i, lab in enumerate(labels):
        n = count[lab]
        x[i] = cats.index(lab) + (0.0 if n == 1 else -0.2 + 0.4 * slot[lab] / (n - 1))
        slot[lab] += 1
    ax.errorbar(
        x, stats[:, 0], yerr=_yerr(stats), fmt="o", capsize=3, alpha=0.8, label="trial (CI)"
    )
    ax.set_xticks(range(len(cats)), cats, rotation=30 if max(len(c) for c in cats) > 8 else 0)
    ax.legend(fontsize="small")


def plot_metric_vs_params(
    trials: Sequence[Trial],
    metric: str,
    out_dir: Path,
    *,
    higher_is_better: bool | None = None,
    alpha: float = 0.05,
    n_resamples: int = 2000,
    seed: int = 0,
) -> list[Path]:
    """One PNG per swept param (``<metric>_vs_<param>.png``): trial means with bootstrap CI bars.

    Numeric params: scatter at the value plus a line through the best trial per value, sorted by
    value (log x-axis when values span two decades). Categorical (and boolean) params: strip of
    trials over a bar at the best per category. A param is skipped when fewer than two distinct
    values have a defined mean; nothing is drawn (``[]``) for fewer than two trials."""
    if len(trials) < 2:
        return []
    higher_is_better = _direction(metric, higher_is_better)
    _check(trials, metric)
    drawn = [(t.name, t.params, _column(t, metric)) for t in trials]
    return cached_files(
        "metric_vs_params",
        (metric, higher_is_better, alpha, n_resamples, seed, drawn),
        out_dir,
        lambda folder: _draw_metric_vs_params(
            trials, metric, folder, higher_is_better, alpha, n_resamples, seed
        ),
    )


def _column(trial: Trial, name: str) -> Any:
    """A per-query column as the plots read it (a cache key's part): float64 values, or the
    objects of a text column; ``None`` when the trial has no such column."""
    if name not in trial.per_query.columns:
        return None
    col = trial.per_query[name]
    if name == "category":
        return [None if v is None or (isinstance(v, float) and v != v) else v for v in col]
    return col.to_numpy(dtype=np.float64)


def _draw_metric_vs_params(
    trials: Sequence[Trial],
    metric: str,
    out_dir: Path,
    higher_is_better: bool,
    alpha: float,
    n_resamples: int,
    seed: int,
) -> list[Path]:
    stats = _summaries(trials, metric, n_resamples, alpha, seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for param in _param_names(trials):
        idx = [i for i, t in enumerate(trials) if param in t.params and np.isfinite(stats[i, 0])]
        values = [trials[i].params[param] for i in idx]
        if len({str(v) for v in values}) < 2:
            continue
        fig, ax = _subplots(figsize=(6.4, 4.2))  # outside pyplot: no global figure to close
        draw = _plot_numeric if _is_numeric(values) else _plot_categorical
        draw(ax, values, stats[idx], higher_is_better)
        ax.set_xlabel(param)
        ax.set_ylabel(metric)
        ax.set_title(f"{metric} vs {param} ({100 * (1 - alpha):g}% bootstrap CI)")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out_dir / f"{_slug(metric)}_vs_{_slug(param)}.png"
        fig.savefig(path, dpi=100)
        paths.append(path)
    return paths


def plot_by_category(
    trials: Sequence[Trial],
    metric: str,
    out_dir: Path,
    top: int = 8,
    *,
    higher_is_better: bool | None = None,
) -> Path | None:
    """Grouped bar chart ``<metric>_by_category.png``: per-category mean of the per-query ``metric``
    (NaN skipped) for the best ``top`` trials by overall mean, one bar group per category (a
    category no trial defines, e.g. unanswerable queries for a ranking metric, is left out); the
    legend names each trial's configuration (:func:`config_label`).

    Returns None when no trial has a non-null ``category`` or no category mean is defined."""
    if not trials:
        return None
    higher_is_better = _direction(metric, higher_is_better)
    _check(trials, metric)
    drawn = [(t.name, t.params, _column(t, metric), _column(t, "category")) for t in trials]
    paths = cached_files(
        "by_category",
        (metric, top, higher_is_better, drawn),
        out_dir,
        lambda folder: _draw_by_category(trials, metric, folder, top, higher_is_better),
    )
    return paths[0] if paths else None


def _draw_by_category(
    trials: Sequence[Trial], metric: str, out_dir: Path, top: int, higher_is_better: bool
) -> list[Path]:
    cats = sorted(
        {
            c
            for t in trials
            if "category" in t.per_query.columns
            for c in t.per_query["category"].dropna().unique()
        },
        key=str,
    )
    if not cats:
        return []
    # pandas' mean skips NaN and gives NaN (no warning) when nothing is defined
    overall = np.array(
        [t.per_query[metric].astype(np.float64).mean() for t in trials], dtype=np.float64
    )
    best = [trials[i] for i in _order(overall, higher_is_better)[: max(top, 1)]]
    table = np.array(
        [
            t.per_query.groupby("category")[metric].mean().reindex(cats).to_numpy(dtype=np.float64)
            if "category" in t.per_query.columns
            else np.full(len(cats), np.nan)
            for t in best
        ]
    )
    defined = np.isfinite(table).any(axis=0)  # a category no trial defines (unanswerable): no slot
    if not defined.any():
        return []
    cats = [c for c, keep in zip(cats, defined, strict=True) if keep]
    table = table[:, defined]
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = _subplots(figsize=(max(6.4, 1.2 * len(cats) * max(len(best), 2) / 3), 4.2))
    x = np.arange(len(cats))
    width = 0.8 / len(best)
    for j, (trial, row) in enumerate(zip(best, table, strict=True)):
        # NaN: no bar, not a false 0
        ax.bar(x - 0.4 + width * (j + 0.5), row, width, label=config_label(trial))
    rotation = 30 if max(len(str(c)) for c in cats) > 8 else 0
    ax.set_xticks(x, [str(c) for c in cats], rotation=rotation)
    ax.set_ylabel(f"mean {metric}")
    ax.set_title(f"{metric} by category (top {len(best)})")
    ax.grid(axis="y", alpha=0.3)
    # below the axes: configuration labels are long and would cover bars
    ax.legend(
        fontsize="small",
        ncols=2 if len(best) > 4 else 1,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18 if rotation else -0.1),
        frameon=False,
    )
    path = out_dir / f"{_slug(metric)}_by_category.png"
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return [path]


# ---------------------------------------------------------------------------------------------
# everything


def write_report(trials: Sequence[Trial], metric: str, out_dir: Path, **kw: Any) -> dict[str, Path]:
    """Write ``leaderboard.csv``, ``leaderboard.md`` and the PNGs into ``out_dir`` (created).

    ``kw``: :func:`leaderboard`'s options (``higher_is_better``, ``alpha``, ``n_resamples``,
    ``n_permutations``, ``seed``; the plots reuse those that apply) and ``top`` for
    :func:`plot_by_category`. Returns ``{file name: path}`` for every file written."""
    return report_files(trials, metric, out_dir, **kw)[1]


def report_files(
    trials: Sequence[Trial], metric: str, out_dir: Path, **kw: Any
) -> tuple[pd.DataFrame, dict[str, Path]]:
    """:func:`write_report`, also returning the leaderboard it wrote (the sweep's end hands it
    to the HTML page, ``rag_lab.report.sweep_page``, instead of ranking the trials twice)."""
    unknown = set(kw) - _LEADERBOARD_KW - {"top"}
    if unknown:
        raise TypeError(f"write_report got unexpected option(s): {', '.join(sorted(unknown))}")
    board_kw = {k: v for k, v in kw.items() if k in _LEADERBOARD_KW}
    ci_kw = {k: v for k, v in kw.items() if k in _CI_KW}
    out_dir.mkdir(parents=True, exist_ok=True)
    board = leaderboard(trials, metric, **board_kw)
    csv_path, md_path = out_dir / "leaderboard.csv", out_dir / "leaderboard.md"
    board.to_csv(csv_path, index=False)
    write_atomic(md_path, to_markdown(board, metric))
    paths = [csv_path, md_path, *plot_metric_vs_params(trials, metric, out_dir, **ci_kw)]
    by_cat = plot_by_category(
        trials, metric, out_dir, top=kw.get("top", 8), higher_is_better=kw.get("higher_is_better")
    )
    if by_cat is not None:
        paths.append(by_cat)
    return board, {p.name: p for p in paths}


def load_trials(sweep_dir: Path) -> list[Trial]:
    """Every job folder of a sweep that finished (has ``metrics.json``), as report ``Trial``
    objects."""
    trials = []
    done = (
        p
        for p in sweep_dir.iterdir()
        if p.is_dir() and not p.is_symlink() and (p / "metrics.json").exists()
    )
    for job in sorted(done, key=lambda p: (len(p.name), p.name)):
        overrides_file = job / ".hydra" / "overrides.yaml"
        overrides = load_own(overrides_file.read_text()) if overrides_file.exists() else []
        params = parse_overrides(overrides)  # typed: fusion.k=60 is 60, not "60"
        metrics = read_metrics(job / "metrics.json")  # null (undefined) read as NaN
        if (job / "mlflow_run_id").exists():
            metrics["_run_id"] = (job / "mlflow_run_id").read_text().strip()
        trials.append(Trial(job.name, params, metrics, pd.read_parquet(job / "per_query.parquet")))
    return trials


def varying(trials: list[Trial]) -> list[Trial]:
    """Trials with only the params whose values differ between them (the swept ones)."""
    keys = {k for t in trials for k in t.params}
    swept = sorted(k for k in keys if len({str(t.params.get(k)) for t in trials}) > 1)
    return [
        Trial(t.name, {k: t.params.get(k) for k in swept}, t.metrics, t.per_query) for t in trials
    ]
