"""Module paths from before ``rag_lab/cli/`` still import, as the very same module objects, and
the ``rag-lab`` console script still points at ``rag_lab.cli:main``."""

from __future__ import annotations

import importlib
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from tests.cli.helpers import ENV

MOVED = {
    "rag_lab.cache_cli": "rag_lab.cli.cache",
    "rag_lab.export_cli": "rag_lab.cli.export",
    "rag_lab.judge_cli": "rag_lab.cli.judge",
    "rag_lab.train.cli": "rag_lab.cli.train",
}


@pytest.mark.parametrize("old, new", MOVED.items())
def test_old_module_is_the_new_one(old: str, new: str):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_old_first_in_a_fresh_interpreter():
    """Importing the old path before the new one gives the same object too."""
    probe = "; ".join(
        [
            "import importlib",
            *(
                f"assert importlib.import_module({old!r}) is "
                f"importlib.import_module({new!r}), {old!r}"
                for old, new in MOVED.items()
            ),
        ]
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_names_callers_import_from_the_old_paths():
    from rag_lab.cli import COMMANDS, main
    from rag_lab.cli.export import run as new_run
    from rag_lab.export_cli import run
    from rag_lab.train.cli import main as train_main

    assert run is new_run and callable(main) and callable(train_main)
    assert COMMANDS["export"][0] == "rag_lab.cli.export"  # a row still indexes as (module, help)


def test_console_script_is_rag_lab_cli_main():
    from rag_lab.cli import main

    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "rag-lab"]
    assert script.value == "rag_lab.cli:main" and script.load() is main


def test_python_dash_m_llm_server_still_runs_the_command():
    """``python -m rag_lab.llm_server`` is what the docs and the end-to-end test start."""
    proc = subprocess.run(
        [sys.executable, "-m", "rag_lab.llm_server", "--help"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert proc.returncode == 0 and "usage: rag-lab llm-server" in proc.stdout, proc.stderr
