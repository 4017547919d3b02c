"""Start-up cost: a run that needs no model and no tracker imports neither (torch, MLflow and
sentence-transformers are seconds of import each, paid by every job of a multirun), and a warm
multirun, whose plots are in the stage cache, does not import matplotlib (issue 36)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli.helpers import ENV
from tests.compose import TOY

HEAVY = ("torch", "mlflow", "sentence_transformers", "transformers")

# run the CLI in a fresh interpreter and report, at exit, which heavy packages were imported
PROBE = """
import atexit, json, sys
heavy = {heavy!r}
atexit.register(lambda: print("LOADED=" + json.dumps([m for m in heavy if m in sys.modules])))
from rag_lab.cli import main
sys.argv = ["rag-lab", *{args!r}]
main()
"""


def loaded(args: list[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    code = PROBE.format(heavy=heavy, args=args)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("LOADED="))
    return json.loads(line.removeprefix("LOADED="))


def test_the_cli_module_imports_no_model_or_tracker():
    code = f"import sys, rag_lab.cli; print([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV)
    assert out.stdout.strip() == "[]", out.stderr


@pytest.mark.parametrize(
    "extra",
    [
        ["retrievers=[bm25]"],
        # a multirun: its sweep callback, leaderboard and report, and a dense hashing job
        ["-m", "retrievers=[bm25],[dense,bm25]", "embedder=hashing", "sweep.report_winner=false"],
    ],
    ids=["bm25", "multirun"],
)
def test_a_bm25_or_hashing_run_without_tracking_imports_none_of_them(tmp_path, extra):
    args = [
        "evaluate",
        *extra,
        "dataset=beir",
        f"dataset.path={TOY}",
        "tracking=none",
        "progress=false",
        "sweep.allow_test_selection=true",
        f"cache.dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]
    assert loaded(args) == []


def test_a_warm_multirun_draws_no_plot_and_imports_no_matplotlib(tmp_path):
    """The sweep's plots are drawn once per content (rag_lab.report.figures): the same sweep
    again copies them from the stage cache, byte for byte, without importing matplotlib. Nor
    does it segment a text (jieba is imported at the first one: every BM25 run is cached) or
    measure a non-ASCII table cell (wcwidth)."""
    args = [
        "evaluate",
        "-m",
        "retrievers=[dense,bm25]",
        "embedder=hashing",
        "tokenizer=jieba",
        "fusion.k=10,30,60",
        "dataset=beir",
        f"dataset.path={TOY}",
        "tracking=none",
        "progress=false",
        "sweep.allow_test_selection=true",
        "sweep.report_winner=false",
        f"cache.dir={tmp_path / 'cache'}",
    ]
    heavy = (*HEAVY, "matplotlib", "jieba", "wcwidth")
    assert loaded([*args, f"hydra.sweep.dir={tmp_path / 'cold'}"], heavy) == ["matplotlib"]
    assert loaded([*args, f"hydra.sweep.dir={tmp_path / 'warm'}"], heavy) == []
    for sweep in ("cold", "warm"):
        assert (tmp_path / sweep / "report.html").is_file()
    plots = sorted(p.name for p in (tmp_path / "cold" / "report").glob("*.png"))
    assert plots and plots == sorted(p.name for p in (tmp_path / "warm" / "report").glob("*.png"))
    for name in plots:
        cold = (tmp_path / "cold" / "report" / name).read_bytes()
        assert cold == (tmp_path / "warm" / "report" / name).read_bytes()
