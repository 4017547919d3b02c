"""The ``rag-lab`` console script points at ``rag_lab.cli:main``; ``python -m rag_lab.cli`` runs
the same commands (``llm-server`` is what the docs and the end-to-end LLM test start)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

from tests.cli.helpers import ENV


def test_console_script_is_rag_lab_cli_main():
    from rag_lab.cli import main

    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "rag-lab"]
    assert script.value == "rag_lab.cli:main" and script.load() is main


def test_python_dash_m_rag_lab_cli_runs_the_llm_server_command():
    proc = subprocess.run(
        [sys.executable, "-m", "rag_lab.cli", "llm-server", "--help"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert proc.returncode == 0 and "usage: rag-lab llm-server" in proc.stdout, proc.stderr
