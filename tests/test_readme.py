"""The README's two commands are the ones CI runs, and the config names it cites exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
    for group, option in set(re.findall(r"\b(embedder|fusion|chunker|tokenizer|dataset)=(\w+)", text)):
        assert (ROOT / "conf" / group / f"{option}.yaml").exists(), f"{group}={option}"
