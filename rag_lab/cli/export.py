"""``rag-lab export``: write a self-contained pipeline folder from a run or a sweep's winner
(:func:`rag_lab.export.export_pipeline` / :func:`rag_lab.export.export_sweep`).

    rag-lab export --run experiments/runs/2026-01-01_12-00-00 --out exports/hybrid
    rag-lab export --sweep experiments/multiruns/2026-01-01_12-00-00 --out exports/best \\
        --log-model --tracking-uri sqlite:///experiments/mlflow.db --register rag_lab_best

Exit codes: 0 written (and logged), 2 refusal or usage error (``error: <reason>`` on stderr).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from rag_lab.cli._options import tracking_uri_option
from rag_lab.cli.register import log_model
from rag_lab.errors import exit_status, user_errors
from rag_lab.tracking.fetch import download_run, resolve_tracking_uri


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="rag-lab export",
        epilog="layout and serving: docs/export.md",
        description="Write a self-contained pipeline folder from a run or a sweep's winner.",
    )
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", type=Path, help="a finished `rag-lab evaluate` run folder")
    src.add_argument(
        "--sweep", type=Path, help="a finished sweep folder (exports the job in winner.json)"
    )
    src.add_argument(
        "--mlflow-run",
        metavar="RUN_ID",
        help="an MLflow run logged by `rag-lab evaluate` (its store: --tracking-uri)",
    )
    ap.add_argument(
        "--test-run",
        type=Path,
        help="with --run: a run of the same pipeline on the "
        "report split (its metrics become metrics_test.json)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        required=True,
        help="export folder to write (must not exist or be empty)",
    )
    ap.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier export at --out (any other non-empty folder is refused)",
    )
    ap.add_argument(
        "--log-model",
        action="store_true",
        help="also log the export as an MLflow pyfunc model (as `rag-lab serve`)",
    )
    tracking_uri_option(ap, "--mlflow-run and --log-model")
    ap.add_argument(
        "--register", metavar="NAME", help="with --log-model: register the model under NAME"
    )
    return ap


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    ap = parser()
    args = ap.parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.test_run and not args.run:
        ap.error("--test-run goes with --run (a sweep's winner_test folder is found by itself)")
    if args.register and not args.log_model:
        ap.error("--register goes with --log-model")
    from rag_lab.export import export_pipeline, export_sweep  # the pipeline's imports load here

    uri = resolve_tracking_uri(args.tracking_uri)
    if args.mlflow_run:
        with tempfile.TemporaryDirectory(prefix="rag_lab_export_run_") as tmp:
            run_dir = download_run(args.mlflow_run, uri, Path(tmp) / "run")
            out = export_pipeline(run_dir, args.out, overwrite=args.overwrite)
    elif args.run:
        out = export_pipeline(
            args.run, args.out, test_run_dir=args.test_run, overwrite=args.overwrite
        )
    else:
        out = export_sweep(args.sweep, args.out, overwrite=args.overwrite)
    print(f"exported to {out}")
    if args.log_model:
        log_model(out, uri, args.register)


def run(argv: Sequence[str]) -> int:
    """The command in-process: its exit status (0 written, 2 refusal or usage error)."""
    return exit_status(main, list(argv))
