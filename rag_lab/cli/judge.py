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

- with ``--labels FILE`` or ``--labels mlflow:<experiment>`` (human 0/1 verdicts, a file or the
  human feedback on MLflow traces, :mod:`rag_lab.judge.evaluation.labels`): each judge's
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
import sys
from collections.abc import Sequence
from pathlib import Path

from rag_lab.errors import ConfigError, exit_status, user_errors
from rag_lab.io.atomic import write_atomic
from rag_lab.judge.evaluation.judging import (
    LABELS_REPORT,
    Item,
    Judged,
    judge_inputs,
    labels_report,
    render_labels_report,
    summary,
    write_side_by_side,
)
from rag_lab.judge.evaluation.logs import judge_names, read_inputs

__all__ = ["main", "parser", "run"]


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
        default=None,
        metavar="FILE",
        help="human verdicts (JSONL or CSV: id, faithful 0/1[, run]; or mlflow:<experiment>"
        "[@uri]: the human 'faithful' feedback on its traces): agreement and PPI CIs",
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


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    from rag_lab.judge.evaluation.calibration import DEFAULT_THRESHOLD
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
        from rag_lab.judge.evaluation.labels import (
            match_labels,
            read_labels,
            read_mlflow_labels,
        )

        given = (
            read_mlflow_labels(args.labels, inputs)
            if args.labels.startswith("mlflow:")
            else read_labels(Path(args.labels))
        )
        labels = match_labels(given, inputs)

    judged: dict[str, Judged] = {}
    skipped: dict[str, str] = {}
    for label, name in specs:
        try:
            one = judge_inputs(label, name, overrides[label], args.cache, inputs, threshold)
        except (ConfigError, JudgeFailedError) as exc:
            if len(specs) == 1:
                raise
            # with several judges a setting is given as LABEL.KEY=VALUE
            skipped[label] = str(exc).replace("--set ", f"--set {label}.")
            print(f"{label} judge: skipped ({skipped[label]})")
            continue
        judged[label] = one
        for x, rows in zip(inputs, one.per_input, strict=True):
            print(summary(label, x, rows, args.out))
        c = one.counts
        print(
            f"  judge failures       {c['failures']} (calls {c['calls']}, "
            f"cache hits {c['cache_hits']})"
        )
    if not judged:
        raise ConfigError(
            "no judge could be run: " + "; ".join(f"{k}: {v}" for k, v in skipped.items())
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.writelines(
            json.dumps(r, ensure_ascii=False) + "\n" for one in judged.values() for r in one.rows
        )
    scores = {label: one.scores for label, one in judged.items()}
    verdicts = {label: one.verdicts for label, one in judged.items()}
    rules = {label: one.rule for label, one in judged.items()}
    report_dir = args.out.parent if args.report_dir is None else args.report_dir
    if labels:
        report = labels_report(
            inputs, scores, verdicts, rules, labels, args.ppi_predictor, args.alpha
        )
        report["skipped"] = skipped
        report_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(report_dir / LABELS_REPORT, json.dumps(report, indent=2, ensure_ascii=False))
        print(render_labels_report(report))
        print(f"\n  report: {report_dir / LABELS_REPORT}")
    if len(specs) > 1:
        lines = write_side_by_side(
            inputs, scores, verdicts, rules, labels, args.examples, skipped, report_dir
        )
        print("\n".join(lines))


def run(argv: Sequence[str]) -> int:
    """The command in-process: its exit status (0 scored, 2 refusal or usage error)."""
    return exit_status(main, list(argv))
