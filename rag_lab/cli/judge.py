"""``rag-lab judge --input logs.jsonl --out scores.jsonl [--judge lexical] [--set key=value ...]
[--cache DIR]``: score logged answers (:mod:`rag_lab.judge.logs`).

Each input line is a JSON object ``{"query", "retrieved_contexts": [str, ...], "response"
[, "reference": str | [str, ...]] [, "id"]}``. Every line is validated before any is scored; a
malformed one is reported as ``error: <file>:<line>: ...`` with exit status 2.

``--judge NAME`` instantiates ``conf/judge/NAME.yaml``; ``--set key=value`` overrides its keys
(``--judge ragas --set base_url=http://127.0.0.1:8000/v1 --set model=local``). The judge runs
through ``JudgeRunner``: failures are retried, then recorded as missing and counted; with
``--cache DIR`` verdicts of judges with an identity (nli, ragas) are cached there (the stage
cache's ``judge`` namespace; ``experiments/cache`` is the one ``rag-lab evaluate`` uses).

Each output line: ``line`` (input line number), ``id`` when given, ``faithfulness`` (null =
missing), ``refusal``, ``context_utilisation``, ``missing_facts``, ``unsupported``, with a
reference ``exact_match``, ``f1``, ``contained``, and ``context_precision`` / ``context_recall`` /
``judge_error`` when the judge gives them. The aggregates of ``rag-lab evaluate``
(:func:`rag_lab.metrics.answers.aggregate_answers`: means over non-missing values, the count of
missing faithfulness scores) and the judge failures are printed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from rag_lab.cli._errors import exit_status, user_errors
from rag_lab.judge.logs import build_runner, judge_names, read_logs, score_record
from rag_lab.metrics.answers import aggregate_answers


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="rag-lab judge", description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", required=True, type=Path, help="JSONL of logged answers")
    ap.add_argument("--out", required=True, type=Path, help="per-line scores (JSONL)")
    ap.add_argument(
        "--judge",
        default="lexical",
        choices=judge_names(),
        help="a config of conf/judge/ (its _target_ is instantiated)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key of the judge's config (repeatable)",
    )
    ap.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="stage-cache folder for judge verdicts (default: no cache)",
    )
    return ap


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    records = read_logs(args.input)
    runner = build_runner(args.judge, args.set, args.cache)
    rows = [score_record(runner, lineno, rec) for lineno, rec in records]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    summary = aggregate_answers(rows)
    missing = int(summary.pop("n_missing_faithfulness"))
    print(f"{args.judge} judge: {len(rows)} lines -> {args.out}")
    for m, value in summary.items():
        if not math.isnan(value):
            print(f"  {m:<20} {value:.4f}")
    print(f"  missing faithfulness {missing}")
    print(
        f"  judge failures       {runner.counts['failures']} (calls {runner.counts['calls']}, "
        f"cache hits {runner.counts['cache_hits']})"
    )


def run(argv: Sequence[str]) -> int:
    """The command in-process: its exit status (0 scored, 2 refusal or usage error)."""
    return exit_status(main, list(argv))
