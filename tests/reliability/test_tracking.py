"""Tracking faults (issue 13): a dead tracking server fails in seconds (or falls back to the local
store with ``tracking.on_error=local``) after the run folder is written; parallel jobs on a
fresh sqlite store all keep their runs; artifacts follow a sqlite store, not the working
directory."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.helpers import ENV, cli, error_line, rag_lab
from tests.compose import TOY_OVERRIDES

BM25 = [*TOY_OVERRIDES, "retrievers=[bm25]", "evaluation.latency_queries=2"]


def dead_uri() -> str:
    """An http URI on a local port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def runs_in(db: Path, experiment: str = "rag_lab") -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id])


@pytest.fixture
def restore_tracking_uri():
    import mlflow

    before = mlflow.get_tracking_uri()
    yield
    mlflow.set_tracking_uri(before)


# ------------------------------------------------------------------ a dead tracking server


def test_dead_server_is_refused_in_seconds(restore_tracking_uri):
    from rag_lab.errors import ConfigError
    from rag_lab.tracking import MlflowTracker

    uri = dead_uri()
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as err:  # was: ~250 s of MLflow's retries, then a traceback
        MlflowTracker(uri=uri).log_run("r", {}, {"ndcg@10": 1.0}, {}, {})
    assert time.perf_counter() - t0 < 10
    assert str(err.value).startswith(f"tracking.uri={uri}: no MLflow server answers")
    assert "tracking.on_error=local" in str(err.value) and "\n" not in str(err.value)


def test_evaluate_with_a_dead_server_fails_in_one_line_before_any_work(tmp_path):
    uri = dead_uri()
    run = tmp_path / "run"
    t0 = time.perf_counter()
    proc = rag_lab(
        "evaluate",
        *BM25,
        f"tracking.uri={uri}",
        f"hydra.run.dir={run}",
        f"paths.experiments={tmp_path / 'exp'}",
        timeout=120,  # the old behaviour (250 s of retries) times out here
    )
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = error_line(proc)
    assert line.startswith(f"error: tracking.uri={uri}: no MLflow server answers"), line
    # probed at start-up: refused before the pipeline runs, so no half-finished run folder
    assert not (run / "metrics.json").exists()
    assert elapsed < 30  # interpreter start and imports; the probe is 2 s at most


def test_on_error_local_falls_back_to_the_local_store_with_a_warning(
    tmp_path, restore_tracking_uri
):
    # in process (tests/cli/helpers.py: cli): the warning and the store it names are what this
    # checks; a fresh interpreter proves nothing more (the dead-server refusal above runs one)
    uri = dead_uri()
    exp = tmp_path / "exp"
    proc = cli(
        "evaluate",
        *BM25,
        f"tracking.uri={uri}",
        "tracking.on_error=local",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"paths.experiments={exp}",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    warning = [ln for ln in proc.stderr.splitlines() if "no MLflow server answers" in ln]
    assert len(warning) == 1 and uri in warning[0] and "tracking.on_error=local" in warning[0]
    assert str(exp / "mlflow.db") in warning[0]
    (logged,) = runs_in(exp / "mlflow.db")
    assert logged.data.metrics["ndcg_at_10"] > 0
    run_id = (tmp_path / "run" / "mlflow_run_id").read_text()
    assert logged.info.run_id == run_id


def test_on_error_other_than_fail_or_local_is_refused():
    from rag_lab.errors import ConfigError
    from rag_lab.tracking import MlflowTracker

    with pytest.raises(ConfigError, match=r"^tracking\.on_error=lokal: expected fail or local$"):
        MlflowTracker(uri="sqlite:///x.db", on_error="lokal")


def test_a_live_server_passes_the_probe(tmp_path):
    """Any HTTP answer counts as alive (the probe is not a health check of MLflow's own)."""
    import http.server
    import threading

    from rag_lab.tracking.mlflow import probe

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert probe(f"http://127.0.0.1:{server.server_port}") is None  # 404 on /health
    finally:
        server.shutdown()
    assert probe(dead_uri()) is not None
    assert probe(f"sqlite:///{tmp_path}/m.db") is None  # only servers are probed


# ------------------------------------------------------------------ parallel jobs, fresh store

JOB = """
import sys
from rag_lab.tracking import MlflowTracker
print(MlflowTracker(uri=sys.argv[1], experiment="par").log_run(
    "job " + sys.argv[2], {"job": sys.argv[2]}, {"ndcg@10": 0.5}, {}, {}))
"""


def test_four_parallel_jobs_on_a_fresh_sqlite_store_all_keep_their_runs(tmp_path):
    db = tmp_path / "fresh" / "mlflow.db"  # neither the folder nor the tables exist yet
    jobs = [
        subprocess.Popen(
            [sys.executable, "-c", JOB, f"sqlite:///{db}", str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        for i in range(4)
    ]
    outs = [job.communicate(timeout=120) for job in jobs]
    # was: three of four died in alembic migrations ("duplicate column name: step")
    assert [job.returncode for job in jobs] == [0] * 4, [err[-1500:] for _, err in outs]
    logged = runs_in(db, "par")
    assert sorted(r.data.params["job"] for r in logged) == ["0", "1", "2", "3"]
    assert {r.info.run_id for r in logged} == {out.strip() for out, _ in outs}


# ------------------------------------------------------------------ artifacts follow the store


def test_artifacts_follow_a_sqlite_store_elsewhere_not_the_working_dir(
    tmp_path, monkeypatch, restore_tracking_uri
):
    a, b = tmp_path / "a", tmp_path / "b"
    b.mkdir()
    monkeypatch.chdir(b)  # in process: the working directory is this process's
    proc = cli(
        "evaluate",
        *BM25,
        f"tracking.uri=sqlite:///{a / 'mlflow.db'}",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"cache.dir={tmp_path / 'cache'}",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # was: b/experiments/mlartifacts/<run>/artifacts/... (paths.experiments follows the cwd)
    assert list(b.rglob("*")) == []
    (logged,) = runs_in(a / "mlflow.db")
    stored = a / "mlartifacts" / logged.info.run_id / "artifacts"
    assert (stored / "metrics" / "metrics.json").is_file()
    assert (stored / "tables" / "per_query.parquet").is_file()


def test_artifact_location_when_given_still_wins(tmp_path, restore_tracking_uri):
    from mlflow.tracking import MlflowClient

    from rag_lab.tracking import MlflowTracker

    report = tmp_path / "r.txt"
    report.write_text("x", encoding="utf-8")
    uri = f"sqlite:///{tmp_path / 'a' / 'm.db'}"
    tracker = MlflowTracker(uri=uri, artifact_location=str(tmp_path / "arts"))
    run_id = tracker.log_run("r", {}, {}, {}, {"": report})
    assert (tmp_path / "arts" / run_id / "artifacts" / "r.txt").is_file()
    exp = MlflowClient(uri).get_experiment_by_name("rag_lab")
    assert exp.artifact_location == (tmp_path / "arts").as_uri()
