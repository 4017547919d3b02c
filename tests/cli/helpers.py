"""Running ``rag-lab`` as a user does (a fresh interpreter), and reading its one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}


def rag_lab(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rag_lab.cli", *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=timeout,
    )


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The one ``error: ...`` line of a refused command (and no traceback)."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return lines[0]
