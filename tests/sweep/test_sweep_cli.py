"""Sweeps through the real CLI on the toy dataset: grid and Optuna multiruns, MLflow parent and
children, leaderboard, select-on-dev/report-on-test, the stage cache across trials, joblib."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.cli.helpers import Ran, cli
from tests.compose import TOY

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}


def sweep_command(tmp_path: Path, *args: str, name: str = "sweep") -> list[str]:
    """``rag-lab evaluate -m`` on the toy dataset, its sweep folder ``tmp_path / name``."""
    return [
        sys.executable,
        "-m",
        "rag_lab.cli",
        "evaluate",
        "-m",
        "dataset=beir",
        f"dataset.path={TOY}",
        "tokenizer=jieba",
        "embedder=hashing",
        f"hydra.sweep.dir={tmp_path / name}",
        f"paths.experiments={tmp_path / 'exp'}",
        *args,
    ]


def sweep(tmp_path: Path, *args: str, name: str = "sweep") -> subprocess.CompletedProcess:
    cmd = sweep_command(tmp_path, *args, name=name)
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600)


def sweep_here(tmp_path: Path, *args: str, name: str = "sweep") -> Ran:
    """``sweep`` in this process: for a sweep refused before any job runs, where a fresh
    interpreter proves nothing more than the exit status and the message."""
    return cli(*sweep_command(tmp_path, *args, name=name)[3:])


def runs(tmp_path: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'exp' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("rag_lab")
    found = client.search_runs([exp.experiment_id])
    parents = [r for r in found if r.data.tags.get("sweep") == "parent"]
    children = [r for r in found if "mlflow.parentRunId" in r.data.tags]
    return client, parents, children


def test_grid_logs_parent_children_leaderboard_and_test_report(tmp_path):
    store = f"sqlite:///{tmp_path / 'exp' / 'mlflow.db'}"  # Hydra escapes it for the jobs
    proc = sweep(
        tmp_path,
        "dataset.split=dev",
        "retrievers=[bm25],[dense],[dense,bm25]",
        f"tracking.uri={store}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sdir = tmp_path / "sweep"
    board = pd.read_csv(sdir / "report" / "leaderboard.csv")
    assert len(board) == 3 and set(board["retrievers"]) == {"[bm25]", "[dense]", "[dense,bm25]"}
    assert board["indistinguishable"].iloc[0]  # the winner
    assert (sdir / "report" / "ndcg_at_10_vs_retrievers.png").read_bytes()[:4] == b"\x89PNG"
    winner = json.loads((sdir / "winner.json").read_text())
    assert winner["report"]["n_queries"] == 8  # re-evaluated on the test split, not dev (1 query)
    client, parents, children = runs(tmp_path)
    assert len(parents) == 1 and len(children) == 3
    parent = parents[0]
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert all(set(c.data.params) == {"retrievers"} for c in children)  # only what varies
    # children are named by what the sweep varies, unescaped; nothing else
    names = {c.info.run_name for c in children}
    assert names == {"retrievers=[bm25]", "retrievers=[dense]", "retrievers=[dense,bm25]"}
    assert all(c.info.status == "FINISHED" for c in children)
    # the parent says what the sweep searched, what it fixed and what it optimised
    p = parent.data.params
    assert p["search.retrievers"] == "[bm25],[dense],[dense,bm25]"
    assert p["fixed.dataset.split"] == "dev" and p["fixed.tracking.uri"] == store
    assert p["optimized_metric"] == "ndcg@10" and p["sweeper"] == "BasicSweeper"
    assert parent.info.run_name == "sweep dev: retrievers"
    assert parent.data.tags["winner_overrides"] and "test/ndcg_at_10" in parent.data.metrics
    assert parent.data.tags["winner_run_id"] in {c.info.run_id for c in children}
    arts = {a.path for a in client.list_artifacts(parent.info.run_id, "sweep")}
    assert {"sweep/leaderboard.csv", "sweep/leaderboard.md", "sweep/winner.json"} <= arts


def test_selecting_on_the_test_split_is_refused(tmp_path):
    proc = sweep(tmp_path, "dataset.split=test", "retrievers=[bm25],[dense]")
    assert proc.returncode != 0
    assert "reserved for reporting" in proc.stderr
    assert not (tmp_path / "sweep" / "0" / "metrics.json").exists()


def test_optuna_direction_against_the_metric_is_refused(tmp_path):
    """``ndcg@10`` with ``direction=minimize`` would search for the worst configuration."""
    proc = sweep_here(
        tmp_path,
        "hparams_search=fusion_weights",
        "dataset.split=dev",
        "hydra.sweeper.n_trials=1",
        "hydra.sweeper.direction=minimize",
    )
    assert proc.returncode != 0
    assert "hydra.sweeper.direction=minimize contradicts optimized_metric=ndcg@10" in proc.stderr
    assert not (tmp_path / "sweep" / "0" / "metrics.json").exists()


def test_optuna_two_trials(tmp_path):
    proc = sweep(
        tmp_path, "hparams_search=fusion_weights", "dataset.split=dev", "hydra.sweeper.n_trials=2"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, parents, children = runs(tmp_path)
    assert len(parents) == 1 and len(children) == 2
    for c in children:
        swept = {"fusion.weights.dense", "fusion.weights.bm25", "fusion.normalization"}
        assert swept <= set(c.data.params)
        name = r"fusion.weights.dense=0\.\d{1,4} fusion.weights.bm25=0\.\d{1,4} "
        assert re.fullmatch(name + r"fusion.normalization=(minmax|zscore)", c.info.run_name)
    p = parents[0].data.params
    assert p["search.fusion.weights.dense"] == "interval(0.0, 1.0)"
    assert p["direction"] == "maximize" and p["n_trials"] == "2" and p["seed"] == "1234"
    assert len(pd.read_csv(tmp_path / "sweep" / "report" / "leaderboard.csv")) == 2


def job_metrics(sdir: Path) -> list[dict]:
    return [json.loads((sdir / str(i) / "metrics.json").read_text()) for i in range(3)]


def test_chunker_sweep_embeds_each_chunk_set_once_and_rerun_is_all_hits(tmp_path):
    args = (
        "dataset.split=dev",
        "sweep.report_winner=false",
        "retrievers=[dense,bm25]",
        "chunker=fixed_size",
        "chunker.overlap=5",
        "chunker.size=40,60,80",
        "fusion=rrf",
        "tracking=none",  # the stage cache is what this checks
    )
    assert sweep(tmp_path, *args, name="a").returncode == 0
    first = job_metrics(tmp_path / "a")
    # the sweep page embeds the plots of the report folder (drawn once, at the sweep's end)
    page = (tmp_path / "a" / "report.html").read_text(encoding="utf-8")
    pngs = sorted((tmp_path / "a" / "report").glob("*.png"))
    assert pngs and all(base64.b64encode(p.read_bytes()).decode() in page for p in pngs)
    # three distinct chunk sets: each embeds its new chunk texts once (one row per text)
    for m in first:
        looked_up = m["cache/embeddings/misses"] + m["cache/embeddings/hits"]
        assert m["cache/embeddings/misses"] > 0 and looked_up <= m["n_chunks"]
    assert sum(m["cache/chunks/misses"] for m in first) == 3
    assert sum(m["cache/documents/misses"] for m in first) == 1
    assert sweep(tmp_path, *args, "fusion=weighted", name="b").returncode == 0
    fused = job_metrics(tmp_path / "b")
    assert sum(m["cache_misses"] for m in fused) == 0  # fusion replays cached runs
    assert sweep(tmp_path, *args, name="c").returncode == 0
    again = job_metrics(tmp_path / "c")
    assert sum(m["cache_misses"] for m in again) == 0
    assert [m["ndcg_at_10"] for m in again] == [m["ndcg_at_10"] for m in first]


@pytest.mark.slow
def test_joblib_launcher_runs_jobs_in_parallel_processes(tmp_path):
    proc = sweep(
        tmp_path,
        "dataset.split=dev",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "retrievers=[bm25],[dense]",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, parents, children = runs(tmp_path)
    assert len(parents) == 1 and len(children) == 2
