"""``rag_lab.errors``: a user error is one ``error:`` line and exit status 2, written once."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from rag_lab.errors import ConfigError, DataError, exit_status, user_errors
from tests.cli.helpers import cli, error_line

PACKAGE = Path(__file__).resolve().parents[2] / "rag_lab"


@user_errors
def refuse(exc: Exception | None, value: int = 7) -> int:
    if exc is not None:
        raise exc
    return value


def test_a_user_error_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        refuse(DataError("corpus.jsonl:3: malformed JSON"))
    assert info.value.code == 2
    assert capsys.readouterr().err == "error: corpus.jsonl:3: malformed JSON\n"
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_success_and_bugs_pass_through(capsys):
    assert refuse(None, value=3) == 3
    with pytest.raises(ValueError, match="a bug"):  # not a RagLabError: a traceback, not exit 2
        refuse(ValueError("a bug"))
    assert capsys.readouterr().err == ""
    assert refuse.__wrapped__.__name__ == "refuse"  # Hydra unwraps it to name the job


def test_exit_status_runs_a_command_in_process(capsys):
    def main(argv: list[str]) -> None:
        if argv == ["fail"]:
            raise ConfigError("unknown key 'k9'")
        if argv == ["regress"]:
            sys.exit(1)

    assert exit_status(user_errors(main), []) == 0
    assert exit_status(user_errors(main), ["regress"]) == 1
    assert exit_status(user_errors(main), ["fail"]) == 2
    assert capsys.readouterr().err == "error: unknown key 'k9'\n"


def test_a_hydra_task_reports_through_the_decorator(tmp_path):
    proc = cli(
        "evaluate",
        "dataset=beir",
        f"dataset.path={tmp_path / 'nope'}",
        f"hydra.run.dir={tmp_path / 'run'}",
        "tracking=none",
    )
    assert proc.returncode == 2
    assert "dataset folder not found" in error_line(proc)


# (an `except RagLabError:` whose body is a bare `raise` lets our errors pass a broad handler)
@pytest.mark.parametrize(
    "pattern", [r"""print\(f?["']error: """, r"except \(?RagLabError[^\n]*:\n(?!\s*raise\n)"]
)
def test_error_is_written_once_in_the_package(pattern):
    """One place prints ``error:`` and turns a ``RagLabError`` into exit 2: ``errors.py``."""
    hits = sorted(
        str(p.relative_to(PACKAGE.parent))
        for p in PACKAGE.rglob("*.py")
        if re.search(pattern, p.read_text(encoding="utf-8"))
    )
    assert hits == ["rag_lab/errors.py"]
