"""``rag-lab register EXPORT [--tracking-uri URI] [--name NAME]``: log an export folder as an
MLflow pyfunc model (:func:`rag_lab.export.pyfunc.log_export`), registered under ``--name`` when
given, and print how to serve it through MLflow (for deployments that go through MLflow; the
HTTP and MCP server of its own is ``rag-lab serve``).

Exit codes: 0 logged, 2 refusal (a broken export, an unreachable store) or usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rag_lab.cli._options import tracking_uri_option
from rag_lab.errors import user_errors
from rag_lab.tracking.fetch import resolve_tracking_uri


def log_model(
    export_dir: Path,
    uri: str,
    register: str | None,
    *,
    verify: bool = True,
    trust_remote_code: bool = False,
) -> str:
    """Log ``export_dir`` at ``uri`` (registered as ``register`` when given); prints the model URI
    and the ``mlflow models serve`` line. Also ``rag-lab export --log-model``."""
    from rag_lab.export.pyfunc import log_export  # mlflow loads here

    model_uri = log_export(
        export_dir, uri, register, verify=verify, trust_remote_code=trust_remote_code
    )
    print(
        f"logged model: {model_uri} ({uri})\n"
        f"serve: MLFLOW_TRACKING_URI={uri} mlflow models serve -m {model_uri} "
        f"--env-manager local"
    )
    return model_uri


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="rag-lab register",
        epilog="layout and serving: docs/serve.md",
        description="Log an export folder as an MLflow pyfunc model and print how to serve it.",
    )
    ap.add_argument("export", type=Path, help="a folder written by `rag-lab export`")
    tracking_uri_option(ap, "the model")
    ap.add_argument("--name", metavar="NAME", help="register the model under NAME")
    ap.add_argument(
        "--no-verify",
        action="store_true",
        help="load the export even if its files differ from manifest.json",
    )
    ap.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="let the export's stages load code shipped with a model",
    )
    return ap


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    log_model(
        args.export,
        resolve_tracking_uri(args.tracking_uri),
        args.name,
        verify=not args.no_verify,
        trust_remote_code=args.trust_remote_code,
    )
