"""On a local Ray cluster (a head and a worker node on 127.0.0.1, ``conftest.py``): a sweep through
``hydra/launcher=ray`` gives the basic launcher's leaderboard, with one MLflow parent and a child
per configuration on one tracking server, and its jobs share the sweep's folders although Ray
starts them in another directory; ``encoding=ray`` gives the single-process embeddings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rag_lab.paths import SAMPLE_DIR
from tests.distributed.cluster import ENV

pytestmark = [pytest.mark.slow, pytest.mark.exclusive]  # one cluster at a time

SWEEP = [
    "dataset.split=dev",
    "embedder=hashing",
    "retrievers=[bm25],[dense],[dense,bm25]",
    "fusion=rrf,weighted",
]


def rag_lab(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "rag_lab.cli", "evaluate", *args]
    return subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=900)


def leaderboard(sweep_dir: Path) -> pd.DataFrame:
    board = pd.read_csv(sweep_dir / "report" / "leaderboard.csv")
    board = board.sort_values(["retrievers", "fusion"]).reset_index(drop=True)
    return board.round(4)


def sample_paragraphs() -> list[str]:
    """A few hundred real texts: the paragraphs of the sample's Markdown documents."""
    files = sorted((SAMPLE_DIR / "maintenance_kb" / "docs").rglob("*.md"))
    return [p.strip() for f in files for p in f.read_text(encoding="utf-8").split("\n\n") if p]


def test_ray_sweep_gives_the_basic_leaderboard_one_parent_six_children(
    ray_cluster, tracking_server, tmp_path
):
    from mlflow.tracking import MlflowClient

    driver = tmp_path / "driver"  # the sweep runs here; Ray starts its workers in ray_cluster.cwd
    driver.mkdir()
    common = [*SWEEP, f"tracking.uri={tracking_server}"]
    ray = rag_lab(
        driver,
        "-m",
        *common,
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={ray_cluster.address}",
        "hydra.sweep.dir=sweeps/ray",  # relative: each job must resolve it in `driver`
    )
    assert ray.returncode == 0, ray.stderr[-4000:]
    assert "is validated against ConfigStore schema" not in ray.stderr
    basic = rag_lab(
        driver, "-m", *common, "hydra.sweep.dir=sweeps/basic", f"cache.dir={tmp_path / 'cache'}"
    )
    assert basic.returncode == 0, basic.stderr[-4000:]

    ray_board, basic_board = (
        leaderboard(driver / "sweeps/ray"),
        leaderboard(driver / "sweeps/basic"),
    )
    assert len(ray_board) == 6
    pd.testing.assert_frame_equal(ray_board, basic_board)

    # the jobs used the sweep's experiments folder and stage cache, not Ray's working directory
    assert not (ray_cluster.cwd / "experiments").exists()
    assert not (ray_cluster.cwd / "sweeps").exists()
    # the sweep's process reads what the jobs cached: the winner's run on the test split loads
    # their chunks and indexes, and the jobs read each other's entries
    winner = json.loads((driver / "sweeps/ray/winner.json").read_text())["report"]
    assert winner["cache/chunks/hits"] >= 1 and winner["cache/indexes/hits"] >= 1
    assert winner["cache/indexes/misses"] == 0
    jobs = [json.loads(p.read_text()) for p in (driver / "sweeps/ray").glob("[0-9]/metrics.json")]
    assert len(jobs) == 6 and sum(m["cache_hits"] for m in jobs) > 0

    client = MlflowClient(tracking_server)
    exp = client.get_experiment_by_name("rag_lab")
    found = client.search_runs([exp.experiment_id])
    for name in ("ray", "basic"):
        parents = [r for r in found if r.data.tags.get("sweep_dir") == f"sweeps/{name}"]
        assert len(parents) == 1, name
        parent = parents[0].info.run_id
        children = [r for r in found if r.data.tags.get("mlflow.parentRunId") == parent]
        assert len(children) == 6, name
        assert all(c.info.status == "FINISHED" for c in children)
        assert all("ndcg_at_10" in c.data.metrics for c in children)
        assert parents[0].info.status == "FINISHED"
    ray_parent = next(r for r in found if r.data.tags.get("sweep_dir") == "sweeps/ray")
    assert ray_parent.data.params["launcher"] == "RayLauncher"


def test_sharded_encoding_equals_single_process_hashing(ray_cluster):
    from rag_lab.distributed import RayShardedEmbedder
    from rag_lab.pipeline.build import instantiate

    texts = sample_paragraphs()
    assert len(texts) >= 200
    config = {
        "_target_": "rag_lab.embedder.HashingEmbedder",
        "tokenizer": {"_target_": "rag_lab.tokenizer.JiebaTokenizer"},
    }
    single = instantiate(config, "embedder").encode_documents(texts)
    sharded = RayShardedEmbedder(config, workers=2)
    out = sharded.encode_documents(texts)
    assert out.shape == single.shape and out.dtype == np.float32
    assert np.array_equal(out, single)  # the same arithmetic, in another process: bit for bit
    assert sharded.identity == instantiate(config, "embedder").identity


def test_sharded_encoding_equals_single_process_minilm(ray_cluster):
    from rag_lab.distributed import RayShardedEmbedder
    from rag_lab.pipeline.build import instantiate

    texts = sample_paragraphs()[:240]
    config = {
        "_target_": "rag_lab.embedder.SentenceTransformerEmbedder",
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "max_seq_length": 256,
    }
    single = instantiate(config, "embedder").encode_documents(texts)
    out = RayShardedEmbedder(config, workers=2).encode_documents(texts)
    assert out.shape == (240, 384)
    assert float(np.abs(out - single).max()) < 1e-5


def test_encoding_ray_in_an_evaluation_fills_the_single_process_cache(ray_cluster, tmp_path):
    """``encoding=ray`` through the CLI: a single-process run of the same config then replays the
    sharded run's cached run (same metrics), and one that must re-index (HNSW) finds every chunk's
    vector in the embeddings cache the sharded run wrote."""
    base = [
        "embedder=hashing",
        "retrievers=[dense]",
        "tracking=none",
        f"paths.experiments={tmp_path / 'exp'}",
    ]

    def run(name: str, *args: str) -> dict:
        proc = rag_lab(tmp_path, *base, *args, f"hydra.run.dir={tmp_path / name}")
        assert proc.returncode == 0, proc.stderr[-4000:]
        return json.loads((tmp_path / name / "metrics.json").read_text())

    sharded = run("sharded", "encoding=ray", f"encoding.address={ray_cluster.address}")
    assert sharded["dense/embedded_chunks"] == sharded["n_chunks"] > 100  # by the Ray tasks
    single = run("single")
    assert single["dense/run_from_cache"] == 1  # how it was encoded does not key the run
    assert single["ndcg_at_10"] == sharded["ndcg_at_10"]
    hnsw = run("hnsw", "retrievers.dense.index_type=hnsw")
    assert hnsw["dense/embedded_chunks"] == 0
    assert hnsw["cache/embeddings/hits"] == sharded["n_chunks"]
