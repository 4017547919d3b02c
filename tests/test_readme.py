"""The README's two commands are the ones CI runs, the config names it cites exist, and CI and
the pre-commit hooks run the same checks."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
GROUP_OPTION = r"\b(embedder|fusion|chunker|tokenizer|dataset)=(\w+)"


def bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_ci_runs_the_readme_commands():
    readme = bash_blocks((ROOT / "README.md").read_text())
    setup, tests = readme[0], readme[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"bash -c '{setup}'" in ci
    assert f"bash -c '{tests}'" in ci


def test_readme_experiments_and_groups_exist():
    text = (ROOT / "README.md").read_text()
    for name in set(re.findall(r"experiment=(\w+)", text)):
        assert (ROOT / "conf" / "experiment" / f"{name}.yaml").exists(), name
    for group, option in set(re.findall(GROUP_OPTION, text)):
        assert (ROOT / "conf" / group / f"{option}.yaml").exists(), f"{group}={option}"


def test_ci_lints_and_type_checks_in_the_venv_and_keeps_every_rc():
    """ruff and mypy run in the README's venv after the tests; each step's rc is kept and the
    script exits with the first non-zero one, after the gate has run."""
    ci = (ROOT / ".ci" / "run").read_text()
    ruff = ci.index("bash -c '. .venv/bin/activate && ruff check .'\nruff_rc=$?")
    mypy = ci.index("bash -c '. .venv/bin/activate && mypy rag_lab'\nmypy_rc=$?")
    tests, gate = ci.index("python -m pytest'\nrc=$?"), ci.index("gate_rc=$?")
    assert tests < ruff < mypy < gate
    assert 'for step_rc in "$rc" "$ruff_rc" "$mypy_rc" "$gate_rc"' in ci[gate:]


def test_pre_commit_runs_what_ci_runs():
    hooks = {
        h["id"]: h
        for repo in yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"]
        for h in repo["hooks"]
    }
    assert {"ruff-check", "ruff-format", "mypy", "trailing-whitespace", "end-of-file-fixer"} <= set(
        hooks
    )
    assert hooks["ruff-check"]["entry"].startswith(".venv/bin/ruff check --fix")
    assert hooks["mypy"]["entry"].split() == [".venv/bin/mypy", "rag_lab"]
    assert hooks["mypy"]["pass_filenames"] is False  # the package, as CI checks it
    for name in ("ruff-check", "ruff-format", "mypy"):
        assert hooks[name]["language"] == "system"  # the venv's tools: CI's versions
        assert hooks[name]["entry"].startswith(".venv/bin/")
