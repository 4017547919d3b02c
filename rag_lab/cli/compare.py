"""``rag-lab compare RUN_A RUN_B``: paired differences ``B - A`` of the headline metrics with
bootstrap CIs, and the queries that got better or worse with both runs' retrieved chunks side by
side, on the console and in an HTML file (:mod:`rag_lab.analysis.compare`).

    rag-lab compare experiments/runs/base experiments/runs/candidate --html compare.html
    rag-lab compare 3f2a...c1 9be0...77 --tracking-uri sqlite:///experiments/mlflow.db

A side is a run folder or an MLflow run id logged by ``rag-lab evaluate``. Runs of different
datasets, splits or dataset fingerprints are refused.

Exit codes: 0 compared, 2 refusal or usage error (``error: <reason>`` on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rag_lab.cli._options import tracking_uri_option
from rag_lab.errors import exit_status, user_errors


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="rag-lab compare",
        description="Compare run B against run A on the same split, query by query.",
    )
    side = "run folder or MLflow run id"
    ap.add_argument("run_a", metavar="RUN_A", help=f"the baseline: {side}")
    ap.add_argument("run_b", metavar="RUN_B", help=f"the candidate: {side}")
    ap.add_argument(
        "--metric",
        default=None,
        help="per-query metric that decides better/worse (default: B's optimized_metric, "
        "ndcg@10 style or logged key)",
    )
    ap.add_argument(
        "--html",
        type=Path,
        default=Path("compare.html"),
        help="HTML file to write (default ./compare.html)",
    )
    ap.add_argument("--show", type=_positive, default=5, help="queries printed per direction")
    ap.add_argument("--depth", type=_positive, default=5, help="chunks printed per query")
    tracking_uri_option(ap, "run ids")
    return ap


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    from rag_lab.analysis.compare import check_same_data, compare, render_console
    from rag_lab.analysis.runs import load_run, with_labels
    from rag_lab.report.compare_page import write_compare_report

    a = load_run(args.run_a, args.tracking_uri)
    b = load_run(args.run_b, args.tracking_uri)
    check_same_data(a, b)  # before the corpus is re-chunked for the chunk texts
    result = compare(with_labels(a), with_labels(b), args.metric)
    render_console(result, show=args.show, depth=args.depth)
    path = write_compare_report(result, args.html, depth=max(args.depth, 10))
    print(f"html: {path}")


def run(argv: Sequence[str]) -> int:
    """The command in-process: its exit status (0 compared, 2 refusal or usage error)."""
    return exit_status(main, list(argv))
