"""A 2-configuration sweep through hydra-submitit-launcher's local executor
(``hydra/launcher=submitit_local``: the SLURM launcher's code path, each job a separate process
started by submitit) gives the basic launcher's leaderboard, one MLflow parent and two children."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.distributed.cluster import ENV

pytestmark = [pytest.mark.slow, pytest.mark.exclusive]  # one cluster at a time

SWEEP = ["dataset.split=dev", "embedder=hashing", "retrievers=[bm25],[dense]"]


def sweep(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "rag_lab.cli",
        "evaluate",
        "-m",
        *SWEEP,
        f"hydra.sweep.dir={tmp_path / name}",
        f"paths.experiments={tmp_path / 'exp'}",
        f"cache.dir={tmp_path / name / 'cache'}",  # each sweep computes its own results
        *args,
    ]
    return subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=900)


def test_submitit_local_sweep_matches_basic_with_parent_and_children(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    from mlflow.tracking import MlflowClient

    local = sweep(
        tmp_path, "submitit", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10"
    )
    assert local.returncode == 0, local.stderr[-4000:]
    basic = sweep(tmp_path, "basic")
    assert basic.returncode == 0, basic.stderr[-4000:]
    # each job ran in a process of its own, started by submitit
    logs = sorted((tmp_path / "submitit" / ".submitit").rglob("*_log.out"))
    assert len(logs) == 2
    boards = [
        pd.read_csv(tmp_path / name / "report" / "leaderboard.csv").sort_values("retrievers")
        for name in ("submitit", "basic")
    ]
    pd.testing.assert_frame_equal(*(b.round(4).reset_index(drop=True) for b in boards))
    client = MlflowClient(f"sqlite:///{tmp_path / 'exp' / 'mlflow.db'}")
    found = client.search_runs([client.get_experiment_by_name("rag_lab").experiment_id])
    parents = [r for r in found if r.data.tags.get("sweep_dir") == str(tmp_path / "submitit")]
    assert len(parents) == 1 and parents[0].data.params["launcher"] == "LocalLauncher"
    children = [r for r in found if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(children) == 2 and all(c.info.status == "FINISHED" for c in children)
    assert {c.info.run_name for c in children} == {"retrievers=[bm25]", "retrievers=[dense]"}
