"""Load (issue 13): N parallel ``rag-lab evaluate`` jobs sharing one stage cache and one fresh
sqlite MLflow store all succeed and all keep their MLflow runs; the cache they filled together is
valid (a following run is all hits); every result equals a sequential run without the cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.cli.helpers import ENV, rag_lab
from tests.compose import TOY_OVERRIDES

N_JOBS = 4
TIMING = ("seconds", "per_second", "_ms", "cache", "embedded_chunks")  # vary run to run


def evaluate_args(run: Path, *more: str) -> list[str]:
    return [
        "evaluate",
        *TOY_OVERRIDES,
        "retrievers=[bm25,dense]",  # parsed docs, chunks, embeddings, both indexes, runs: cached
        "evaluation.latency_queries=2",
        f"hydra.run.dir={run}",
        *more,
    ]


def quality(run: Path) -> dict[str, float]:
    metrics = json.loads((run / "metrics.json").read_text())
    return {k: v for k, v in metrics.items() if not any(t in k for t in TIMING)}


@pytest.mark.slow  # ~40 s on 2 shared cores: six evaluate processes
def test_parallel_jobs_share_a_cache_and_a_fresh_store(tmp_path):
    from mlflow.tracking import MlflowClient

    db = tmp_path / "store" / "mlflow.db"  # fresh: no folder, no tables
    shared = [f"cache.dir={tmp_path / 'cache'}", f"tracking.uri=sqlite:///{db}"]
    shared.append(f"paths.experiments={tmp_path / 'exp'}")
    runs = [tmp_path / f"run{i}" for i in range(N_JOBS)]
    jobs = [
        subprocess.Popen(
            [sys.executable, "-m", "rag_lab.cli", *evaluate_args(run, *shared)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        for run in runs
    ]
    errors = [job.communicate(timeout=300)[1] for job in jobs]
    assert [job.returncode for job in jobs] == [0] * N_JOBS, [e[-1500:] for e in errors]

    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name("rag_lab")
    logged = {r.info.run_id for r in client.search_runs([exp.experiment_id])}
    assert logged == {(run / "mlflow_run_id").read_text() for run in runs}

    after = tmp_path / "after"  # the cache the parallel jobs filled: all entries readable
    proc = rag_lab(*evaluate_args(after, *shared))
    assert proc.returncode == 0, proc.stderr[-2000:]
    counters = json.loads((after / "metrics.json").read_text())
    assert counters["cache_misses"] == 0 and counters["cache_hits"] > 0

    alone = tmp_path / "alone"  # sequential, nothing cached, nothing tracked
    proc = rag_lab(*evaluate_args(alone, "cache.dir=null", "tracking=none"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    want, want_table = quality(alone), pd.read_parquet(alone / "per_query.parquet")
    assert want["ndcg_at_10"] > 0
    for run in [*runs, after]:
        assert quality(run) == want, run.name
        pd.testing.assert_frame_equal(pd.read_parquet(run / "per_query.parquet"), want_table)
