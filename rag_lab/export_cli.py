"""``rag-lab export``: write a self-contained pipeline folder from a run or a sweep's winner.

    rag-lab export --run experiments/runs/2026-01-01_12-00-00 --out exports/hybrid
    rag-lab export --sweep experiments/sweeps/2026-01-01_12-00-00 --out exports/best \\
        --log-model --tracking-uri sqlite:///experiments/mlflow.db --register rag_lab_best

Exit codes: 0 written (and logged), 2 refusal or usage error (``error: <reason>`` on stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    from rag_lab.gate import DEFAULT_TRACKING_URI

    ap = argparse.ArgumentParser(prog="rag-lab export", description="Write a self-contained pipeline folder from a run or a sweep's winner.",
                                 epilog="layout and serving: docs/export.md")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", type=Path, help="a finished `rag-lab evaluate` run folder")
    src.add_argument("--sweep", type=Path, help="a finished sweep folder (exports the job in winner.json)")
    src.add_argument("--mlflow-run", metavar="RUN_ID", help="an MLflow run logged by `rag-lab evaluate` "
                                                             "(its store: --tracking-uri)")
    ap.add_argument("--test-run", type=Path, help="with --run: a run of the same pipeline on the report split "
                                                  "(its metrics become metrics_test.json)")
    ap.add_argument("--out", type=Path, required=True, help="export folder to write (must not exist or be empty)")
    ap.add_argument("--overwrite", action="store_true", help="replace a non-empty --out")
    ap.add_argument("--log-model", action="store_true", help="also log the export as an MLflow pyfunc model")
    ap.add_argument("--tracking-uri", default=None,
                    help=f"MLflow store for --log-model (default $MLFLOW_TRACKING_URI or {DEFAULT_TRACKING_URI})")
    ap.add_argument("--register", metavar="NAME", help="with --log-model: register the model under NAME")
    return ap


def run(argv: Sequence[str]) -> int:
    """Parse ``argv``, export (and log); returns the exit code."""
    from rag_lab.errors import RagLabError
    from rag_lab.gate import DEFAULT_TRACKING_URI

    ap = parser()
    args = ap.parse_args(list(argv))
    if args.test_run and not args.run:
        ap.error("--test-run goes with --run (a sweep's winner_test folder is found by itself)")
    if args.register and not args.log_model:
        ap.error("--register goes with --log-model")
    try:
        from rag_lab.export import export_pipeline, export_sweep

        uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
        if args.mlflow_run:
            import tempfile

            from rag_lab.export import materialize_mlflow_run

            with tempfile.TemporaryDirectory(prefix="rag_lab_export_run_") as tmp:
                run_dir = materialize_mlflow_run(args.mlflow_run, uri, Path(tmp) / "run")
                out = export_pipeline(run_dir, args.out, overwrite=args.overwrite)
        elif args.run:
            out = export_pipeline(args.run, args.out, test_run_dir=args.test_run, overwrite=args.overwrite)
        else:
            out = export_sweep(args.sweep, args.out, overwrite=args.overwrite)
        print(f"exported to {out}")
        if args.log_model:
            from rag_lab.serve import log_export

            model_uri = log_export(out, uri, args.register)
            print(f"logged model: {model_uri} ({uri})\n"
                  f"serve: MLFLOW_TRACKING_URI={uri} mlflow models serve -m {model_uri} --env-manager local")
    except RagLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
