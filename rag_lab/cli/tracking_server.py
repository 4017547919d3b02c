"""``rag-lab tracking-server start|stop|status [--dir DIR] [--port N]``: an MLflow tracking
server with a PostgreSQL backend and an artifact folder, made from nothing in ``DIR``
(:mod:`rag_lab.tracking.server`). ``start`` prints the tracking URI alone on stdout (for
``export MLFLOW_TRACKING_URI=$(rag-lab tracking-server start)``; ``tracking=server`` reads it),
the details on stderr; ``status`` exits 1 when nothing runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rag_lab.errors import user_errors


def parser() -> argparse.ArgumentParser:
    from rag_lab.tracking.server import DEFAULT_PORT, DEFAULT_WORKERS, default_dir

    ap = argparse.ArgumentParser(
        prog="rag-lab tracking-server",
        description="Start, stop or check an MLflow tracking server on PostgreSQL (127.0.0.1).",
    )
    ap.add_argument("action", choices=("start", "stop", "status"))
    ap.add_argument(
        "--dir",
        default=str(default_dir()),
        help="server folder: PostgreSQL data, artifacts, logs, state (default %(default)s)",
    )
    ap.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"MLflow's port on 127.0.0.1 (default {DEFAULT_PORT}; 0 = any free port)",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKERS,
        help="mlflow server worker processes (default %(default)s)",
    )
    return ap


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    from rag_lab.tracking import server

    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.action == "start":
        state = server.start(args.dir, args.port, args.workers)
        how = "already running" if state["already_running"] else "started"
        print(
            f"MLflow tracking server {how} from {args.dir}: backend {state['backend_store']}, "
            f"artifacts {state['artifacts']}; use tracking=server or "
            f"tracking.uri={state['tracking_uri']}",
            file=sys.stderr,
        )
        print(state["tracking_uri"], flush=True)
    elif args.action == "stop":
        stopped = server.stop(args.dir)
        print(f"{'stopped' if stopped else 'nothing was running'} ({args.dir})")
    else:
        running = server.status(args.dir)
        if running is None:
            print(f"not running ({args.dir})")
            sys.exit(1)
        print(
            f"running: {running['tracking_uri']} (mlflow pid {running['mlflow_pid']}, "
            f"PostgreSQL pid {running['postgres_pid']} on port {running['postgres_port']})"
        )
