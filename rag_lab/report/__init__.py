"""Self-contained HTML reports (one file each: inline CSS, script and images, nothing fetched):

- :func:`write_run_report` → ``<run folder>/report.html`` (``rag_lab.report.run_page``)
- :func:`write_sweep_report` → ``<sweep folder>/report.html`` (``rag_lab.report.sweep_page``)
- the page of ``rag-lab compare`` (``rag_lab.report.compare_page``)

``figures`` is the one place plots get their backend and CJK font; ``data`` reads a run (folder
or MLflow id) and the labels its drill-down shows; ``html`` holds the escaped building blocks.
Imports are lazy: ``rag_lab.report.leaderboard`` imports ``rag_lab.report.figures``, and the sweep
page imports ``rag_lab.report.leaderboard``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_run_report(run_dir: Path, labels: Any = None) -> Path:
    """``<run_dir>/report.html`` (see :func:`rag_lab.report.run_page.write_run_report`)."""
    from rag_lab.report.run_page import write_run_report as write

    return write(Path(run_dir), labels)


def write_sweep_report(sweep_dir: Path, **computed: Any) -> Path:
    """``<sweep_dir>/report.html`` (see :func:`rag_lab.report.sweep_page.write_sweep_report`;
    ``computed``: what the sweep's end already has, :func:`rag_lab.report.sweep_page.
    render_sweep`)."""
    from rag_lab.report.sweep_page import write_sweep_report as write

    return write(Path(sweep_dir), **computed)


__all__ = ["write_run_report", "write_sweep_report"]
