"""``rag-lab runs close-stale [--tracking-uri URI]``: mark ``KILLED`` the MLflow runs that a
process of this host left ``RUNNING`` when it died (``kill -9``, out of memory), in every
experiment of the store (:mod:`rag_lab.tracking.stale`). Every new run does the same for its own
experiment; this is the on-demand form, e.g. after a killed sweep.

Exit codes: 0 done (the closed run ids on stdout, one a line), 2 refusal or usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rag_lab.cli._options import tracking_uri_option
from rag_lab.errors import ConfigError, exit_status, user_errors


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="rag-lab runs close-stale",
        description="Mark KILLED the MLflow runs left RUNNING by processes of this host that "
        "are gone (same host, pid not alive or started at another time).",
    )
    tracking_uri_option(ap, "the runs")
    return ap


@user_errors
def close_stale(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    from rag_lab.tracking.fetch import resolve_tracking_uri
    from rag_lab.tracking.mlflow import MlflowTracker, sqlite_path

    uri = resolve_tracking_uri(args.tracking_uri)
    db = sqlite_path(uri)
    if db is not None and not db.is_file():
        raise ConfigError(f"no MLflow store at {uri} ({db} does not exist)")
    closed = MlflowTracker(uri).close_stale()
    for run_id in closed:
        print(run_id)
    print(f"{len(closed)} stale run(s) marked KILLED in {uri}", file=sys.stderr)


def run(argv: Sequence[str]) -> int:
    """The command in-process: its exit status."""
    return exit_status(close_stale, list(argv))
