"""``rag-lab traces to-dataset --experiment NAME --out DIR [--uri URI]``: the traces of an MLflow
experiment (``rag-lab evaluate`` runs, served requests) as a query set in the BEIR layout, with
qrels from the human feedback where people gave some (``rag_lab.tracking.feedback``).

Evaluate it against the corpus the traces came from::

    rag-lab evaluate dataset=beir dataset.path=DIR dataset.corpus=/abs/corpus   # labelled
    rag-lab evaluate dataset=beir dataset.path=DIR dataset.corpus=/abs/corpus dataset.labels=false

Exit codes: 0 written, 2 refusal (no such store or experiment, no trace with a query)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rag_lab.errors import exit_status, user_errors


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="rag-lab traces", description="MLflow traces as data.")
    sub = ap.add_subparsers(dest="task", required=True)
    to = sub.add_parser("to-dataset", help="an experiment's traces as a BEIR query set")
    to.add_argument("--experiment", required=True, help="MLflow experiment name")
    to.add_argument("--out", required=True, type=Path, help="folder to write (BEIR layout)")
    to.add_argument(
        "--uri",
        default=None,
        help="tracking URI (default: $MLFLOW_TRACKING_URI, else experiments/)",
    )
    return ap


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    from rag_lab.tracking.feedback import traces_to_beir
    from rag_lab.tracking.fetch import resolve_tracking_uri

    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    counts = traces_to_beir(args.experiment, resolve_tracking_uri(args.uri), args.out)
    print(
        f"{counts['queries']} queries ({counts['labelled']} labelled, "
        f"{counts['queries'] - counts['labelled']} for label-free evaluation) -> {args.out}"
        + (
            f"; {counts['skipped']} traces without a query text skipped"
            if counts["skipped"]
            else ""
        )
    )


def run(argv: Sequence[str]) -> int:
    return exit_status(main, list(argv))
