"""``rag-lab report DIR``: write the self-contained ``report.html`` of a run folder or a sweep
folder (:func:`rag_lab.report.write_run_report` / :func:`rag_lab.report.write_sweep_report`).

    rag-lab report experiments/runs/2026-01-01_12-00-00        # -> .../report.html
    rag-lab report experiments/multiruns/2026-01-01_12-00-00   # the sweep's page

A folder with ``metrics.json`` is a run; one whose job folders have it is a sweep. Chunk texts
and gold evidence are rebuilt from the run's ``config_resolved.yaml`` (stage cache when present).

Exit codes: 0 written, 2 refusal or usage error (``error: <reason>`` on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rag_lab.errors import ConfigError, exit_status, user_errors


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="rag-lab report",
        description="Write report.html (one self-contained file) for a run or a sweep folder.",
    )
    ap.add_argument("folder", type=Path, help="a `rag-lab evaluate` run folder or sweep folder")
    return ap


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    folder: Path = args.folder
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder")
    from rag_lab.report import write_run_report, write_sweep_report

    if (folder / "metrics.json").is_file():
        path = write_run_report(folder)
    else:
        path = write_sweep_report(folder)
    print(f"report: {path}")


def run(argv: Sequence[str]) -> int:
    """The command in-process: its exit status (0 written, 2 refusal or usage error)."""
    return exit_status(main, list(argv))
