"""The walk's page (``<walk folder>/report.html``) and its waterfall figure
(:mod:`rag_lab.analysis.walk`).

The waterfall is inline SVG written here (no plotting library, no script): step 0's value on the
report split as a bar from the axis, then one floating bar per step from the kept state's value
to that plus the step's paired difference (its bootstrap CI as a whisker) — green when it helps,
red when it hurts, hollow and grey when the select split dropped it (the running total does not
move), a flat marker when it was skipped — and the final kept state as the last bar. The same SVG
is the README's figure (:func:`write_waterfall_svg`).

The page: the steps with their decisions (select split difference, CI, sign-flip p), every
step's report-split means and paired differences per metric, one waterfall per metric, per
category tables, and each step's overrides.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple
from xml.sax.saxutils import escape as _xml_escape

from rag_lab.analysis.walk import ALWAYS, Diff, StepResult, WalkResult, gain
from rag_lab.errors import ConfigError
from rag_lab.io.atomic import write_atomic
from rag_lab.metrics.names import higher_is_better, metric_key
from rag_lab.report import html as h

REPORT_FILE = "report.html"
_W, _H = 760, 360
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 16, 28, 96
_COLOURS = {"up": "#2e8b57", "down": "#c0392b", "total": "#4a6fa5", "dropped": "#9aa0a6"}


def _x(value: str) -> str:
    return _xml_escape(value, {'"': "&quot;"})


def _decision(step: StepResult) -> str:
    if step.skipped:
        return f"skipped ({step.skipped})"
    if step.kept is None:
        return "start"
    if step.decided_by == ALWAYS:
        return "kept (prerequisite)"
    return "kept" if step.kept else "dropped"


class _Bar(NamedTuple):
    name: str
    kind: str  # total | up | down | dropped | skipped
    low: float  # bar ends on the axis
    high: float
    value: float  # the label: a state's value, a step's difference
    ci: tuple[float, float] | None  # whisker ends


def _bars(result: WalkResult, metric: str, split: str) -> list[_Bar]:
    """One bar per step, then the final kept state."""
    key = metric_key(metric)
    bars: list[_Bar] = []
    total = math.nan
    for step in result.steps:
        if step.kept is None and not step.skipped:  # step 0
            total = step.means[split][key]
            bars.append(_Bar(step.name, "total", 0.0, total, total, None))
        elif step.skipped:
            bars.append(_Bar(step.name, "skipped", total, total, math.nan, None))
        else:
            d: Diff = step.diffs[split][key]
            end = total + d.mean
            kind = "dropped" if not step.kept else ("up" if gain(d, metric) >= 0 else "down")
            ci = (total + d.low, total + d.high)
            bars.append(_Bar(step.name, kind, min(total, end), max(total, end), d.mean, ci))
            if step.kept:
                total = step.means[split][key]
    bars.append(_Bar("final", "total", 0.0, total, total, None))
    return bars


def waterfall_svg(result: WalkResult, metric: str | None = None, split: str | None = None) -> str:
    """The waterfall of ``metric`` (default the walk's select metric) on ``split`` (default the
    report split) as a standalone ``<svg>`` element."""
    metric = metric or result.plan.select_metric
    split = split or result.plan.report_split
    known = result.steps[0].means.get(split, {})
    if metric_key(metric) not in known:
        raise ConfigError(
            f"walk {result.plan.name}: no {metric!r} on {split} (measured: {', '.join(known)})"
        )
    bars = _bars(result, metric, split)
    ends = [v for b in bars for v in (b.low, b.high, *(b.ci or ())) if math.isfinite(v)]
    top = max([1.0, *ends]) if ends else 1.0
    bottom = 0.0
    plot_h = _H - _TOP - _BOTTOM
    slot = (_W - _LEFT - _RIGHT) / len(bars)

    def y(v: float) -> float:
        return _TOP + plot_h * (1 - (v - bottom) / (top - bottom))

    direction = "higher is better" if higher_is_better(metric) else "lower is better"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="waterfall" viewBox="0 0 {_W} {_H}" '
        f'width="{_W}" height="{_H}" role="img" data-metric="{_x(metric_key(metric))}" '
        'font-family="sans-serif" font-size="11">',
        f"<title>{_x(f'{metric} on {split}, step by step ({direction})')}</title>",
        f'<rect x="0" y="0" width="{_W}" height="{_H}" fill="#ffffff"/>',
        f'<text x="{_LEFT}" y="16" font-size="13" font-weight="bold">'
        f"{_x(f'{metric} on {split} ({direction})')}</text>",
    ]
    for t in range(6):  # axis: 0, 0.2, ..., 1.0 of the range
        v = bottom + (top - bottom) * t / 5
        parts.append(
            f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
            'stroke="#e3e3e3"/>'
            f'<text x="{_LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>'
        )
    for i, bar in enumerate(bars):
        name, kind = bar.name, bar.kind
        x0 = _LEFT + i * slot + slot * 0.15
        w = slot * 0.7
        low, high = bar.low, bar.high
        if not (math.isfinite(low) and math.isfinite(high)):
            low = high = bottom
        y_top, y_bot = y(high), y(low)
        height = max(y_bot - y_top, 1.5)
        if kind == "dropped":
            style = f'fill="none" stroke="{_COLOURS["dropped"]}" stroke-dasharray="4 3"'
        elif kind == "skipped":
            style = f'fill="{_COLOURS["dropped"]}"'
        else:
            style = f'fill="{_COLOURS[kind]}"'
        label = f"{name}: {kind}"
        parts.append(
            f'<g class="step" data-step="{_x(name)}" data-kind="{kind}">'
            f"<title>{_x(label)}</title>"
            f'<rect class="bar {kind}" x="{x0:.1f}" y="{y_top:.1f}" width="{w:.1f}" '
            f'height="{height:.1f}" {style}/>'
        )
        if bar.ci and all(math.isfinite(c) for c in bar.ci):
            lo, hi = y(bar.ci[0]), y(bar.ci[1])
            cx = x0 + w / 2
            parts.append(
                f'<line class="ci" x1="{cx:.1f}" x2="{cx:.1f}" y1="{lo:.1f}" y2="{hi:.1f}" '
                'stroke="#333"/>'
            )
        value = bar.value
        text = (
            "skipped"
            if kind == "skipped"
            else (f"{value:.3f}" if kind == "total" else f"{value:+.3f}")
        )
        parts.append(
            f'<text x="{x0 + w / 2:.1f}" y="{y_top - 4:.1f}" text-anchor="middle">{_x(text)}</text>'
        )
        label_y = _H - _BOTTOM + 14
        parts.append(
            f'<text x="{x0 + w / 2:.1f}" y="{label_y}" text-anchor="end" '
            f'transform="rotate(-35 {x0 + w / 2:.1f} {label_y})">{_x(name)}</text></g>'
        )
    legend = [
        ("up", "kept, helps"),
        ("down", "kept, hurts"),
        ("dropped", f"dropped on {result.plan.select_split}"),
        ("total", "state"),
    ]
    lx = _LEFT
    for kind, text in legend:
        style = (
            f'fill="none" stroke="{_COLOURS[kind]}" stroke-dasharray="4 3"'
            if kind == "dropped"
            else f'fill="{_COLOURS[kind]}"'
        )
        parts.append(
            f'<rect x="{lx}" y="{_H - 16}" width="10" height="10" {style}/>'
            f'<text x="{lx + 14}" y="{_H - 7}">{_x(text)}</text>'
        )
        lx += 150
    parts.append("</svg>")
    return "".join(parts)


def write_waterfall_svg(result: WalkResult, path: Path, metric: str | None = None) -> Path:
    """The waterfall as an SVG file (the README's figure)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, '<?xml version="1.0" encoding="utf-8"?>\n' + waterfall_svg(result, metric))
    return path


def _diff_cell(d: Diff | None, metric: str) -> h.Html:
    if d is None or not math.isfinite(d.mean):
        return h.Html("–")
    good = gain(d, metric)
    cls = "better" if good > 0 else ("worse" if good < 0 else "")
    return h.Html(
        f'<span class="{cls}">{d.mean:+.4f}</span> '
        f'<span class="note">{h.esc(h.ci_text(d.low, d.high))} p={d.p:.3f}</span>'
    )


def _steps_table(result: WalkResult) -> h.Html:
    plan = result.plan
    sel, rep = plan.select_split, plan.report_split
    keys = [metric_key(m) for m in plan.metrics]
    headers = ["#", "step", "what it adds", f"decided by ({sel})", f"{sel} Δ [CI] p", "decision"]
    headers += [f"{rep} {k}" for k in keys]
    rows = []
    for s in result.steps:
        dk = metric_key(s.decided_by or s.decision_metric)
        dev = s.diffs.get(sel, {}).get(dk) if s.diffs else None
        row: list[object] = [s.index, s.name, s.note, dk, _diff_cell(dev, dk), _decision(s)]
        for k in keys:
            mean = s.means.get(rep, {}).get(k, math.nan) if s.means else math.nan
            d = s.diffs.get(rep, {}).get(k) if s.diffs else None
            extra = f"<br>{_diff_cell(d, k)}" if d is not None else ""
            row.append(h.Html(f"{h.esc(h.fmt(mean))}{extra}"))
        rows.append(row)
    return h.scroll(h.table(headers, rows, numeric=[0]))


def _category_tables(result: WalkResult) -> h.Html:
    rep = result.plan.report_split
    cats = sorted({c for s in result.steps for c in s.by_category.get(rep, {})})
    out = []
    for m in result.plan.metrics:
        k = metric_key(m)
        rows = []
        for s in result.steps:
            if s.skipped:
                continue
            cells: list[object] = [s.index, f"{s.name} ({_decision(s)})"]
            for c in cats:
                mean = s.by_category.get(rep, {}).get(c, {}).get(k, math.nan)
                delta = (
                    s.category_diffs.get(rep, {}).get(c, {}).get(k) if s.category_diffs else None
                )
                text = h.esc(h.fmt(mean, 3))
                if delta is not None and math.isfinite(delta) and delta != 0:
                    text += f' <span class="note">({delta:+.3f})</span>'
                cells.append(h.Html(text))
            rows.append(cells)
        out.append(f"<h3>{h.esc(k)}</h3>")
        out.append(h.scroll(h.table(["#", "step", *cats], rows, numeric=[0])))
    return h.Html("".join(out))


def _overrides(result: WalkResult) -> h.Html:
    rows = [
        (s.index, s.name, h.Html(f"<code>{h.esc(' '.join(s.overrides))}</code>"))
        for s in result.steps
    ]
    return h.table(["#", "step", "rag-lab evaluate overrides"], rows, numeric=[0])


def walk_page(result: WalkResult) -> str:
    plan = result.plan
    rule = (
        f"greedy forward selection: each step is added to the steps kept so far and kept iff its "
        f"decision metric gains more than {plan.min_gain:g} on {plan.select_split} (paired "
        f"difference against the state it was built on; an exact tie goes to "
        f"{', '.join(plan.tie_break) or 'nothing: dropped'}, in order); "
        f"{plan.report_split} never decides. "
        f"CIs: paired bootstrap ({plan.n_resamples} resamples, {1 - plan.alpha:.0%}); p: "
        "two-sided sign-flip test."
    )
    figures = "".join(
        f'<figure class="svg">{waterfall_svg(result, m)}</figure>' for m in plan.metrics
    )
    body = "".join(
        [
            h.section("Steps", _steps_table(result), "steps", rule),
            h.section(
                f"Waterfall ({plan.report_split})",
                figures,
                "waterfall",
                "one bar per step from the kept state; whiskers: the step's paired CI",
            ),
            h.section(
                f"By category ({plan.report_split})",
                _category_tables(result),
                "categories",
                "mean per category; in brackets the paired difference against the state the "
                "step was built on",
            ),
            h.section("Overrides", _overrides(result), "overrides"),
        ]
    )
    nav = [
        ("steps", "Steps"),
        ("waterfall", "Waterfall"),
        ("categories", "By category"),
        ("overrides", "Overrides"),
    ]
    return h.page(
        f"walk {plan.name}",
        f"selected on {plan.select_split}, reported on {plan.report_split}; "
        f"{len(result.steps)} steps",
        nav,
        body,
    )


def write_walk_report(result: WalkResult, out_dir: Path) -> Path:
    """``<out_dir>/report.html``: the walk's page."""
    path = Path(out_dir) / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, walk_page(result))
    return path


__all__ = ["waterfall_svg", "walk_page", "write_walk_report", "write_waterfall_svg"]
