"""Running ``rag-lab`` as a user does (a fresh interpreter), and reading its one-line errors."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

_FIXED = {"HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}


class _Env(Mapping[str, str]):
    """The environment a subprocess gets: this process's environment *now* (each test's own
    ``RAG_LAB_EXPERIMENTS``, tests/conftest.py) plus ``_FIXED``; ``{**ENV, ...}`` works too."""

    def _now(self) -> dict[str, str]:
        return {**os.environ, **_FIXED}

    def __getitem__(self, key: str) -> str:
        return self._now()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())


ENV = _Env()


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


def error_line(proc: subprocess.CompletedProcess | Ran) -> str:
    """The one ``error: ...`` line of a refused command (and no traceback)."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@dataclass(frozen=True)
class Ran:
    """What an in-process ``rag-lab`` command left: its exit status and what it printed (the
    fields of ``subprocess.CompletedProcess`` that tests read)."""

    returncode: int
    stdout: str
    stderr: str


def cli(*args: str) -> Ran:
    """``rag-lab <args>`` in this process: for checks of what a command says and its exit
    status, where a fresh interpreter proves nothing more (and costs seconds of imports).
    Hydra's logging of the run is pointed at the captured stderr and put back afterwards."""
    from rag_lab.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv, root = sys.argv[:], logging.getLogger()
    handlers, level = root.handlers[:], root.level
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = argv
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)
    return Ran(code, out.getvalue(), err.getvalue())
