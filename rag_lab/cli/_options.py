"""Command-line options more than one command takes, written once."""

from __future__ import annotations

import argparse

from rag_lab.paths import default_tracking_uri


def tracking_uri_option(ap: argparse.ArgumentParser, what: str) -> None:
    """``--tracking-uri`` (resolve with :func:`rag_lab.tracking.fetch.resolve_tracking_uri`)."""
    ap.add_argument(
        "--tracking-uri",
        default=None,
        help=f"MLflow store for {what} (default $MLFLOW_TRACKING_URI or {default_tracking_uri()})",
    )
