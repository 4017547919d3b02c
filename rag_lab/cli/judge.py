"""``rag-lab judge --input LOGS [LOGS ...] --out scores.jsonl [--judge [LABEL=]NAME ...]
[--set [LABEL.]KEY=VALUE ...] [--cache DIR] [--labels FILE] [--threshold 0.5]
[--report-dir DIR]``: score logged answers (:mod:`rag_lab.judge.evaluation.logs`).

Each input is a JSONL file or a run folder of ``rag-lab evaluate`` with a generator (its
``answers.jsonl``). Each input line is a JSON object ``{"query", "retrieved_contexts": [str,
...], "response" [, "reference": str | [str, ...]] [, "id"]}``. Every line is validated before
any is scored; a malformed one is reported as ``error: <file>:<line>: ...`` with exit status 2.

``--judge NAME`` instantiates ``conf/judge/NAME.yaml``; ``--set key=value`` overrides its keys
(``--judge ragas --set base_url=http://127.0.0.1:8000/v1 --set model=local``). Several
``--judge`` options score the same answers with each; ``LABEL=NAME`` names a second instance of
a config (``--judge strict=lexical --set strict.support_threshold=0.8``) and, with several
judges, each ``--set`` names its judge (``--set nli.model=/models/nli``). With several judges, one
that cannot be built (a missing setting) or that fails on every input (an unreachable endpoint)
is skipped and reported; with one, that is an error (exit 2). Judges run through
``JudgeRunner``: failures are retried, then recorded as missing and counted; with ``--cache DIR``
verdicts of judges with an identity (nli, ragas) are cached there (the stage cache's ``judge``
namespace; ``experiments/cache`` is the one ``rag-lab evaluate`` uses).

Each output line: ``line`` (input line number), ``id`` when given, ``run`` (the input),
``judge`` (its label), ``faithfulness`` (null = missing), ``refusal``, ``context_utilisation``,
``missing_facts``, ``unsupported``, with a reference ``exact_match``, ``f1``, ``contained``, and
``context_precision`` / ``context_recall`` / ``judge_error`` when the judge gives them. The
aggregates of ``rag-lab evaluate`` (:func:`rag_lab.metrics.answers.aggregate_answers`) and the
judge failures are printed per judge and input.

Reports, in ``--report-dir`` (default: the folder of ``--out``):

- with ``--labels FILE`` (human 0/1 verdicts, :mod:`rag_lab.judge.evaluation.labels`): each judge's
  agreement with them (accuracy and Cohen's κ of its verdicts: its own rule when it has one, the
  lexical judge's ``verdict_threshold`` + facts, else ``score >= --threshold``; AUROC of the score)
  and each input's faithful share estimated by prediction-powered inference (the judge on all
  answers corrected by the labelled ones, :mod:`rag_lab.judge.evaluation.calibration`) with its CI,
  next to the judged mean and the labels alone: printed and written to ``judge_labels.json``;
- with several judges: ``judges_side_by_side.csv`` (every answer, every judge's score and
  verdict) and ``judges_side_by_side.md`` (pairwise agreement, disagreements with examples;
  :mod:`rag_lab.judge.evaluation.compare`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag_lab.errors import ConfigError, exit_status, user_errors
from rag_lab.judge.evaluation.logs import (
    LoggedAnswers,
    build_runner,
    judge_names,
    read_inputs,
    read_logs,
    record_key,
    score_record,
)
from rag_lab.metrics.answers import aggregate_answers

__all__ = ["build_runner", "main", "parser", "read_logs", "run"]

LABELS_REPORT = "judge_labels.json"
SIDE_BY_SIDE = "judges_side_by_side"  # .csv and .md

Item = tuple[int, int]  # (input index, line of the record)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="rag-lab judge", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--input",
        required=True,
        type=Path,
        nargs="+",
        help="JSONL of logged answers, or run folders with an answers.jsonl (several: one per "
        "configuration)",
    )
    ap.add_argument("--out", required=True, type=Path, help="per-line scores (JSONL)")
    ap.add_argument(
        "--judge",
        action="append",
        default=None,
        metavar="[LABEL=]NAME",
        help=f"a config of conf/judge/ ({', '.join(judge_names())}); repeatable (default lexical)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="[LABEL.]KEY=VALUE",
        help="override a key of the judge's config (repeatable; LABEL. with several judges)",
    )
    ap.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="stage-cache folder for judge verdicts (default: no cache)",
    )
    ap.add_argument(
        "--labels",
        type=Path,
        default=None,
        metavar="FILE",
        help="human verdicts (JSONL or CSV: id, faithful 0/1[, run]): agreement and PPI CIs",
    )
    ap.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="score from which an answer is judged faithful, for judges without a verdict rule "
        "of their own (nli, ragas; default 0.5)",
    )
    ap.add_argument(
        "--ppi-predictor",
        choices=("score", "verdict"),
        default="score",
        help="what PPI corrects: the judge's mean score (default) or its share of verdicts",
    )
    ap.add_argument("--alpha", type=float, default=0.05, help="1 - CI level (default 0.05)")
    ap.add_argument(
        "--report-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder for the label and side-by-side reports (default: the folder of --out)",
    )
    ap.add_argument(
        "--examples", type=int, default=5, help="disagreements shown per pair of judges"
    )
    return ap


def judge_specs(specs: Sequence[str] | None) -> list[tuple[str, str]]:
    """``(label, config name)`` of each ``--judge`` (``NAME`` or ``LABEL=NAME``)."""
    out: list[tuple[str, str]] = []
    names = judge_names()
    for spec in specs or ["lexical"]:
        label, _, name = spec.rpartition("=")
        label = label or name
        if name not in names:
            raise ConfigError(f"--judge: unknown judge {name!r} (choose from {', '.join(names)})")
        if not label.isidentifier():
            raise ConfigError(f"--judge: label {label!r} must be a name (letters, digits, _)")
        if label in dict(out):
            raise ConfigError(f"--judge: label {label!r} given twice (use LABEL=NAME)")
        out.append((label, name))
    return out


def split_overrides(sets: Sequence[str], labels: Sequence[str]) -> dict[str, list[str]]:
    """Each ``--set`` to its judge: ``LABEL.KEY=VALUE``, or ``KEY=VALUE`` with a single judge."""
    out: dict[str, list[str]] = {label: [] for label in labels}
    for s in sets:
        head, dot, rest = s.partition(".")
        if dot and head in out and "=" not in head:
            out[head].append(rest)
        elif len(labels) == 1:
            out[labels[0]].append(s)
        else:
            raise ConfigError(
                f"--set {s!r}: with several judges write LABEL.KEY=VALUE "
                f"(labels: {', '.join(labels)})"
            )
    return out


def _summary(label: str, x: LoggedAnswers, rows: list[dict[str, Any]], out: Path) -> str:
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
    from rag_lab.judge.evaluation.calibration import agreement, ppi_faithfulness

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


def print_labels_report(report: dict[str, Any]) -> None:
    level = round(100 * (1 - report["alpha"]))
    print(f"\nagreement with {report['n_labels']} labels")
    print(
        f"  {'judge':<14} {'n':>5} {'accuracy':>8} {'kappa':>7} {'auroc':>7} {'judged':>7} "
        f"{'labels':>7}"
    )
    for judge, r in report["judges"].items():
        a = r["agreement"]
        print(
            f"  {judge:<14} {a['n']:>5} {_fmt(a['accuracy']):>8} {_fmt(a['kappa']):>7} "
            f"{_fmt(a['auroc']):>7} {_fmt(a['judged_faithful']):>7} "
            f"{_fmt(a['labelled_faithful']):>7}  (verdict: {r['verdict']})"
        )
    print(
        f"\nfaithful share per run: PPI = judge ({report['ppi_predictor']}) on all answers "
        f"corrected by the labelled ones, {level}% CI"
    )
    print(
        f"  {'run':<24} {'judge':<12} {'answers':>7} {'labels':>6} {'judged':>7} "
        f"{'PPI [CI]':>26} {'labels only [CI]':>26}"
    )
    for judge, r in report["judges"].items():
        for run, rr in r["runs"].items():
            f = rr["faithfulness"]
            print(
                f"  {run[-24:]:<24} {judge:<12} {f['n_answers']:>7} {f['n_labelled']:>6} "
                f"{_fmt(f['judged']):>7} {_fmt(f['estimate'])} "
                f"[{_fmt(f['low'])}, {_fmt(f['high'])}] {_fmt(f['labels_only'])} "
                f"[{_fmt(f['labels_low'])}, {_fmt(f['labels_high'])}]"
            )


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    from rag_lab.judge.evaluation.calibration import DEFAULT_THRESHOLD, verdict
    from rag_lab.judge.runner import JudgeFailedError

    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    threshold = DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    if not 0.0 <= threshold <= 1.0:
        raise ConfigError(f"--threshold must be in [0, 1], got {threshold}")
    if not 0.0 < args.alpha < 1.0:
        raise ConfigError(f"--alpha must be in (0, 1), got {args.alpha}")
    specs = judge_specs(args.judge)
    overrides = split_overrides(args.set, [label for label, _ in specs])
    inputs = read_inputs(args.input)
    labels: dict[Item, int] = {}
    if args.labels is not None:
        from rag_lab.judge.evaluation.labels import match_labels, read_labels

        labels = match_labels(read_labels(args.labels), inputs)

    rows: list[dict[str, Any]] = []
    scores: dict[str, dict[Item, float | None]] = {}
    verdicts: dict[str, dict[Item, int | None]] = {}
    rules: dict[str, str] = {}  # how each judge's verdicts were made
    skipped: dict[str, str] = {}
    for label, name in specs:
        try:
            runner = build_runner(name, overrides[label], args.cache)
            judged = [
                [score_record(runner, lineno, rec) for lineno, rec in x.records] for x in inputs
            ]
        except (ConfigError, JudgeFailedError) as exc:
            if len(specs) == 1:
                raise
            # with several judges a setting is given as LABEL.KEY=VALUE
            skipped[label] = str(exc).replace("--set ", f"--set {label}.")
            print(f"{label} judge: skipped ({skipped[label]})")
            continue
        scores[label], verdicts[label] = {}, {}
        own = False
        for i, (x, judged_rows) in enumerate(zip(inputs, judged, strict=True)):
            for r in judged_rows:
                scores[label][i, r["line"]] = r["faithfulness"]
                verdicts[label][i, r["line"]] = verdict(
                    r["faithfulness"], r.get("faithful"), threshold
                )
                own = own or r.get("faithful") is not None
                rows.append({**r, "run": x.name, "judge": label})
            print(_summary(label, x, judged_rows, args.out))
        rules[label] = "its own rule" if own else f"score >= {threshold}"
        print(
            f"  judge failures       {runner.counts['failures']} (calls {runner.counts['calls']}, "
            f"cache hits {runner.counts['cache_hits']})"
        )
    if not scores:
        raise ConfigError(
            "no judge could be run: " + "; ".join(f"{k}: {v}" for k, v in skipped.items())
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)

    report_dir = args.out.parent if args.report_dir is None else args.report_dir
    if labels:
        report = labels_report(
            inputs, scores, verdicts, rules, labels, args.ppi_predictor, args.alpha
        )
        report["skipped"] = skipped
        report_dir.mkdir(parents=True, exist_ok=True)
        (report_dir / LABELS_REPORT).write_text(
            json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8"
        )
        print_labels_report(report)
        print(f"\n  report: {report_dir / LABELS_REPORT}")
    if len(specs) > 1:
        write_side_by_side(
            inputs, scores, verdicts, rules, labels, args.examples, skipped, report_dir
        )


def write_side_by_side(
    inputs: Sequence[LoggedAnswers],
    scores: dict[str, dict[Item, float | None]],
    verdicts: dict[str, dict[Item, int | None]],
    rules: dict[str, str],
    labels: dict[Item, int],
    examples: int,
    skipped: dict[str, str],
    report_dir: Path,
) -> None:
    from rag_lab.judge.evaluation.compare import disagreement_markdown, pairwise, side_by_side

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
    (report_dir / f"{SIDE_BY_SIDE}.md").write_text(
        disagreement_markdown(table, pairs, judges, rules, examples, skipped), encoding="utf-8"
    )
    print("\njudges side by side:")
    for p in pairs:
        print(
            f"  {p['a']} vs {p['b']}: {p['n_disagree']} of {p['n']} answers disagree"
            + (f", kappa {p['kappa']:.4f}" if p["kappa"] is not None else "")
        )
    print(f"  table: {report_dir / SIDE_BY_SIDE}.csv, summary: {report_dir / SIDE_BY_SIDE}.md")


def run(argv: Sequence[str]) -> int:
    """The command in-process: its exit status (0 scored, 2 refusal or usage error)."""
    return exit_status(main, list(argv))
