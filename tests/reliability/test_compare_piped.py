"""``rag-lab compare`` into a pipe (issue 32, item 15).

Before: rich assumed 80 columns where stdout is not a terminal and cut every number of the metric
table to ``0.6…`` (and the metric names, and the ``queries`` header). Now the table is printed at
the width it needs there: whole numbers, whole names."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from rag_lab.evaluate import evaluate
from tests.cli.helpers import ENV
from tests.compose import TOY_OVERRIDES, compose_evaluate

NUMBER = re.compile(r"[-+]?\d\.\d{4}")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    dirs = []
    for name in ("bm25", "dense"):
        cfg = compose_evaluate(
            [*TOY_OVERRIDES, f"retrievers=[{name}]", "tracking=none", "cache.dir=null"],
            tmp / name,
        )
        evaluate(cfg)
        dirs.append(cfg.paths.output_dir)
    return dirs


def test_piped_compare_prints_whole_numbers(two_runs, tmp_path):
    a, b = two_runs
    proc = subprocess.run(  # stdout a pipe, as `rag-lab compare a b | tee`
        [sys.executable, "-m", "rag_lab.cli", "compare", a, b, "--html", str(tmp_path / "c.html")],
        capture_output=True,
        text=True,
        env={**ENV, "COLUMNS": "", "TERM": "dumb"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("│")]
    header = next(ln for ln in proc.stdout.splitlines() if ln.startswith("┃"))
    assert "queries" in header and "…" not in header
    metric_rows = [r for r in rows if NUMBER.search(r)][:5]
    assert metric_rows, proc.stdout
    for row in metric_rows:
        assert "…" not in row, row
        # A, B, B - A, the two ends of the CI and p: six numbers with four decimals each
        assert len(NUMBER.findall(row)) == 6, row
