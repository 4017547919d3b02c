"""A ``rag-lab judge`` session over logged answers: each judge scores every input
(``judge_inputs``), its verdicts are compared with human labels (``labels_report``: agreement and
prediction-powered faithful shares) and with the other judges (``write_side_by_side``). The
command line (``rag_lab.cli.judge``) only reads its options, calls these and prints what they
return."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_lab.io.atomic import write_atomic
from rag_lab.judge.evaluation.calibration import agreement, ppi_faithfulness, verdict
from rag_lab.judge.evaluation.compare import disagreement_markdown, pairwise, side_by_side
from rag_lab.judge.evaluation.logs import LoggedAnswers, build_runner, record_key, score_record
from rag_lab.metrics.answers import aggregate_answers

LABELS_REPORT = "judge_labels.json"
SIDE_BY_SIDE = "judges_side_by_side"  # .csv and .md

Item = tuple[int, int]  # (input index, line of the record)


@dataclass
class Judged:
    """One judge over every input: its output ``rows`` (``run`` and ``judge`` added), its score
    and verdict per item, the rule its verdicts follow and its runner's ``counts``."""

    label: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    per_input: list[list[dict[str, Any]]] = field(default_factory=list)
    scores: dict[Item, float | None] = field(default_factory=dict)
    verdicts: dict[Item, int | None] = field(default_factory=dict)
    rule: str = ""
    counts: Counter[str] = field(default_factory=Counter)


def judge_inputs(
    label: str,
    name: str,
    overrides: Sequence[str],
    cache_dir: Path | None,
    inputs: Sequence[LoggedAnswers],
    threshold: float,
) -> Judged:
    """Judge ``conf/judge/<name>.yaml`` (with ``overrides``) over every record of ``inputs``.
    A verdict is the judge's own rule when it gives one, else ``score >= threshold``. Raises
    ``ConfigError`` (cannot be built) or ``JudgeFailedError`` (fails on every input)."""
    runner = build_runner(name, overrides, cache_dir)
    per_input = [[score_record(runner, lineno, rec) for lineno, rec in x.records] for x in inputs]
    out = Judged(label, per_input=per_input, counts=Counter(runner.counts))
    own = False
    for i, (x, judged_rows) in enumerate(zip(inputs, per_input, strict=True)):
        for r in judged_rows:
            out.scores[i, r["line"]] = r["faithfulness"]
            out.verdicts[i, r["line"]] = verdict(r["faithfulness"], r.get("faithful"), threshold)
            own = own or r.get("faithful") is not None
            out.rows.append({**r, "run": x.name, "judge": label})
    out.rule = "its own rule" if own else f"score >= {threshold}"
    return out


def summary(label: str, x: LoggedAnswers, rows: list[dict[str, Any]], out: Path) -> str:
    """One judge's aggregates over one input, as the console shows them."""
    summary = aggregate_answers(rows)
    missing = int(summary.pop("n_missing_faithfulness"))
    lines = [f"{label} judge: {len(rows)} lines of {x.name} -> {out}"]
    lines += [f"  {m:<20} {v:.4f}" for m, v in summary.items() if not math.isnan(v)]
    lines.append(f"  missing faithfulness {missing}")
    return "\n".join(lines)


def _fmt(x: Any) -> str:
    return "     –" if x is None else f"{x:.4f}"


def labels_report(
    inputs: Sequence[LoggedAnswers],
    scores: dict[str, dict[Item, float | None]],
    verdicts: dict[str, dict[Item, int | None]],
    rules: dict[str, str],
    labels: dict[Item, int],
    predictor: str,
    alpha: float,
) -> dict[str, Any]:
    """Agreement (pooled and per input) and per-input PPI faithfulness of every judge."""
    report: dict[str, Any] = {
        "verdicts": rules,
        "alpha": alpha,
        "ppi_predictor": predictor,
        "n_labels": len(labels),
        "judges": {},
    }
    for judge, by_item in scores.items():
        per_run = {}
        for i, x in enumerate(inputs):
            run_scores = {k: v for k, v in by_item.items() if k[0] == i}
            run_verdicts = {k: v for k, v in verdicts[judge].items() if k[0] == i}
            run_labels = {k: v for k, v in labels.items() if k[0] == i}
            per_run[x.name] = {
                "agreement": agreement(run_labels, run_scores, run_verdicts),
                "faithfulness": ppi_faithfulness(
                    run_scores,
                    run_verdicts,
                    run_labels,
                    "verdict" if predictor == "verdict" else "score",
                    alpha,
                ),
            }
        report["judges"][judge] = {
            "verdict": rules[judge],
            "agreement": agreement(labels, by_item, verdicts[judge]),
            "runs": per_run,
        }
    return report


def render_labels_report(report: dict[str, Any]) -> str:
    """``labels_report`` as the console shows it."""
    out: list[str] = []
    level = round(100 * (1 - report["alpha"]))
    out.append(f"\nagreement with {report['n_labels']} labels")
    out.append(
        f"  {'judge':<14} {'n':>5} {'accuracy':>8} {'kappa':>7} {'auroc':>7} {'judged':>7} "
        f"{'labels':>7}"
    )
    for judge, r in report["judges"].items():
        a = r["agreement"]
        out.append(
            f"  {judge:<14} {a['n']:>5} {_fmt(a['accuracy']):>8} {_fmt(a['kappa']):>7} "
            f"{_fmt(a['auroc']):>7} {_fmt(a['judged_faithful']):>7} "
            f"{_fmt(a['labelled_faithful']):>7}  (verdict: {r['verdict']})"
        )
    out.append(
        f"\nfaithful share per run: PPI = judge ({report['ppi_predictor']}) on all answers "
        f"corrected by the labelled ones, {level}% CI"
    )
    out.append(
        f"  {'run':<24} {'judge':<12} {'answers':>7} {'labels':>6} {'judged':>7} "
        f"{'PPI [CI]':>26} {'labels only [CI]':>26}"
    )
    for judge, r in report["judges"].items():
        for run, rr in r["runs"].items():
            f = rr["faithfulness"]
            out.append(
                f"  {run[-24:]:<24} {judge:<12} {f['n_answers']:>7} {f['n_labelled']:>6} "
                f"{_fmt(f['judged']):>7} {_fmt(f['estimate'])} "
                f"[{_fmt(f['low'])}, {_fmt(f['high'])}] {_fmt(f['labels_only'])} "
                f"[{_fmt(f['labels_low'])}, {_fmt(f['labels_high'])}]"
            )
    return "\n".join(out)


def write_side_by_side(
    inputs: Sequence[LoggedAnswers],
    scores: dict[str, dict[Item, float | None]],
    verdicts: dict[str, dict[Item, int | None]],
    rules: dict[str, str],
    labels: dict[Item, int],
    examples: int,
    skipped: dict[str, str],
    report_dir: Path,
) -> list[str]:
    """Every answer under every judge (``judges_side_by_side.csv``) and the pairwise agreement
    with examples of disagreements (``.md``) written to ``report_dir``; returns the console
    lines."""
    items: dict[Item, dict[str, Any]] = {
        (i, lineno): {
            "run": x.name,
            "id": record_key(lineno, rec),
            "query": rec["query"],
            "response": rec["response"],
        }
        for i, x in enumerate(inputs)
        for lineno, rec in x.records
    }
    judges = list(scores)
    table = side_by_side(items, scores, verdicts, dict(labels))
    pairs = pairwise(table, judges)
    report_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(report_dir / f"{SIDE_BY_SIDE}.csv", index=False)
    write_atomic(
        (report_dir / f"{SIDE_BY_SIDE}.md"),
        disagreement_markdown(table, pairs, judges, rules, examples, skipped),
    )
    lines = ["", "judges side by side:"]
    for p in pairs:
        lines.append(
            f"  {p['a']} vs {p['b']}: {p['n_disagree']} of {p['n']} answers disagree"
            + (f", kappa {p['kappa']:.4f}" if p["kappa"] is not None else "")
        )
    lines.append(
        f"  table: {report_dir / SIDE_BY_SIDE}.csv, summary: {report_dir / SIDE_BY_SIDE}.md"
    )
    return lines
