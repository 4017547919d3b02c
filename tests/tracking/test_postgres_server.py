"""rag_lab.tracking.server (``rag-lab tracking-server``): an MLflow tracking server on PostgreSQL
started from nothing, four ``rag-lab evaluate`` jobs logging to it at once (each run read back
through ``MlflowClient`` with every metric of its ``metrics.json``, and from PostgreSQL's own
tables), a clean stop that leaves no process and no open port; the one-line refusals; and the
two races parallel jobs on a server run into (creating the experiment, logging the dataset),
replayed on a sqlite store.

Skipped only where PostgreSQL's server programs are absent (``bash scripts/install_system_deps.sh``
installs the package ``postgresql``; CI runs it)."""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_lab.errors import ConfigError, exit_status
from rag_lab.tracking import server
from tests.cli.helpers import ENV, error_line, rag_lab


def _has_postgres() -> bool:
    try:
        server.postgres_bindir()
    except ConfigError:
        return False
    return True


needs_postgres = pytest.mark.skipif(
    not _has_postgres(),
    reason="PostgreSQL server programs (initdb, pg_ctl) absent: "
    "bash scripts/install_system_deps.sh installs the package `postgresql`",
)


@pytest.fixture
def server_dir(tmp_path: Path) -> Iterator[Path]:
    """A fresh server folder, stopped and removed afterwards whatever the test did. As root the
    cluster runs as `postgres`, which cannot enter pytest's 0700 tmp_path: a world-searchable
    folder under the system temp folder instead."""
    if os.geteuid() == 0:
        parent = Path(tempfile.mkdtemp(prefix="rag_lab_pg_"))
        parent.chmod(0o755)
    else:
        parent = tmp_path
    folder = parent / "server"
    try:
        yield folder
    finally:
        server.stop(folder)
        if parent != tmp_path:
            shutil.rmtree(parent, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((server.HOST, port)) == 0


K1 = ("0.9", "1.2", "1.5", "2.0")  # one BM25 k1 per job: four runs with their own metrics


@needs_postgres
@pytest.mark.slow  # a first start creates MLflow's tables; four jobs at once on 2 cores
@pytest.mark.exclusive  # a machine-wide service: one such test at a time
@pytest.mark.timeout(900)
def test_four_parallel_jobs_log_to_the_postgres_server_which_stops_cleanly(server_dir, tmp_path):
    import psycopg2
    from mlflow.tracking import MlflowClient

    started = rag_lab("tracking-server", "start", "--dir", str(server_dir), "--port", "0")
    assert started.returncode == 0, started.stderr
    uri = started.stdout.strip()  # the URI alone on stdout
    state = json.loads((server_dir / "state.json").read_text())
    assert uri == state["tracking_uri"] and uri.startswith("http://127.0.0.1:")
    assert (server_dir / "pgdata" / "PG_VERSION").is_file()
    assert oct((server_dir / "password").stat().st_mode & 0o777) == "0o600"

    again = rag_lab("tracking-server", "start", "--dir", str(server_dir))  # idempotent
    assert again.returncode == 0 and again.stdout.strip() == uri, again.stderr
    assert "already running" in again.stderr
    assert json.loads((server_dir / "state.json").read_text())["mlflow_pid"] == state["mlflow_pid"]

    env = {**ENV, "MLFLOW_TRACKING_URI": uri}  # what conf/tracking/server.yaml reads
    jobs = {
        k1: subprocess.Popen(
            [
                *(sys.executable, "-m", "rag_lab.cli", "evaluate"),
                "tracking=server",
                "tracking.experiment=parallel",
                "retrievers=[bm25]",
                f"retrievers.bm25.k1={k1}",
                f"hydra.run.dir={tmp_path / f'run_{k1}'}",
                f"paths.experiments={tmp_path / 'exp'}",  # one stage cache, shared
                "progress=false",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k1 in K1
    }
    for k1, job in jobs.items():
        out, err = job.communicate(timeout=600)
        assert job.returncode == 0, f"k1={k1}: {err[-3000:]}"
    assert not (tmp_path / "exp" / "mlflow.db").exists()  # nothing fell back to the sqlite file

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("parallel")
    assert exp is not None and exp.artifact_location.startswith("mlflow-artifacts:")
    runs = {r.info.run_id: r for r in client.search_runs([exp.experiment_id])}
    assert len(runs) == 4
    ndcg = set()
    for k1 in K1:
        out_dir = tmp_path / f"run_{k1}"
        run = runs[(out_dir / "mlflow_run_id").read_text().strip()]
        assert run.info.status == "FINISHED" and run.data.params["retrievers.bm25.k1"] == k1
        expected = {
            name: value
            for name, value in json.loads((out_dir / "metrics.json").read_text()).items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            if math.isfinite(value)
        }
        logged = run.data.metrics  # the headline ones (logged_metrics), each its own value
        assert "ndcg_at_10" in logged and set(logged) <= set(expected), k1
        assert logged == pytest.approx({k: expected[k] for k in logged}, rel=1e-12), k1
        assert len(run.inputs.dataset_inputs) == 1  # the dataset, logged by four jobs at once
        files = {a.path for a in client.list_artifacts(run.info.run_id, "metrics")}
        assert files == {"metrics/metrics.json"}
        stored = Path(state["artifacts"]) / exp.experiment_id / run.info.run_id / "artifacts"
        assert (stored / "metrics" / "metrics.json").is_file()  # uploaded through the server
        ndcg.add(expected["ndcg_at_10"])
    assert len(ndcg) > 1  # the four k1 are four different runs, not one logged four times

    # the runs are rows of PostgreSQL's tables (not a file store the server fell back to)
    password = (server_dir / "password").read_text().strip()
    conn = psycopg2.connect(
        host="127.0.0.1",
        port=state["postgres_port"],
        user="mlflow",
        password=password,
        dbname="mlflow",
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT run_uuid FROM runs WHERE experiment_id = %s", (exp.experiment_id,))
            assert {row[0] for row in cur.fetchall()} == set(runs)
    finally:
        conn.close()

    pids = [state["mlflow_pid"], state["postgres_pid"]]
    stopped = rag_lab("tracking-server", "stop", "--dir", str(server_dir))
    assert stopped.returncode == 0 and stopped.stdout.startswith("stopped"), stopped.stderr
    assert not any(server.alive(pid) for pid in pids)
    assert server.group_members(state["mlflow_pid"], state["mlflow_start_ticks"]) == []
    assert not _listening(state["port"]) and not _listening(state["postgres_port"])
    assert not (server_dir / "state.json").exists()
    assert rag_lab("tracking-server", "status", "--dir", str(server_dir)).returncode == 1
    assert rag_lab("tracking-server", "stop", "--dir", str(server_dir)).stdout.startswith(
        "nothing was running"
    )


@needs_postgres
def test_a_taken_port_is_one_line_and_starts_nothing(server_dir, capsys):
    from rag_lab.cli.tracking_server import main

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert exit_status(main, ["start", "--dir", str(server_dir), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"error: port {port} on 127.0.0.1 is already in use: stop what listens there or choose "
        "another with --port (0 = any free port)"
    )
    assert not (server_dir / "pgdata").exists() and not (server_dir / "state.json").exists()


def test_postgresql_missing_names_the_package(tmp_path, monkeypatch, capsys):
    from rag_lab.cli.tracking_server import main

    monkeypatch.setenv("PATH", str(tmp_path))  # no initdb on PATH
    monkeypatch.setattr(server, "DEBIAN_PG", tmp_path / "usr_lib_postgresql")  # nor Debian's
    assert exit_status(main, ["start", "--dir", str(tmp_path / "server"), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: PostgreSQL server programs")
    assert "install the package `postgresql`" in err and "install_system_deps.sh" in err


def test_the_newest_debian_version_is_chosen(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for version in ("9.6", "15", "13"):
        bindir = tmp_path / version / "bin"
        bindir.mkdir(parents=True)
        for name in ("initdb", "pg_ctl"):
            (bindir / name).write_text("")
    (tmp_path / "17" / "bin").mkdir(parents=True)  # a client-only install: no server programs
    monkeypatch.setattr(server, "DEBIAN_PG", tmp_path)
    assert server.postgres_bindir() == tmp_path / "15" / "bin"


def test_psycopg2_missing_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "psycopg2" else real(name)
    )
    with pytest.raises(ConfigError, match=r"pip install 'rag_lab\[server\]'"):
        server.check_driver()


@needs_postgres
@pytest.mark.skipif(os.geteuid() != 0, reason="as root only: PostgreSQL runs as `postgres` then")
def test_root_refuses_a_folder_the_postgres_user_cannot_reach(tmp_path):
    closed = tmp_path / "closed"  # pytest's tmp_path is under a 0700 folder of root's
    with pytest.raises(ConfigError, match="the `postgres` user.*cannot write.*choose a --dir"):
        server.start(closed, port=0)
    assert not (closed / "state.json").exists()


def test_stop_and_status_of_a_folder_with_nothing_running(tmp_path):
    proc = rag_lab("tracking-server", "status", "--dir", str(tmp_path / "none"))
    assert proc.returncode == 1 and proc.stdout.startswith("not running")
    proc = rag_lab("tracking-server", "stop", "--dir", str(tmp_path / "none"))
    assert proc.returncode == 0 and proc.stdout.startswith("nothing was running")
    proc = rag_lab("tracking-server", "start", "--dir", str(tmp_path), "--port", "70000")
    assert error_line(proc) == "error: --port 70000: expected 0..65535"


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads start times in /proc")
def test_stop_signals_the_group_it_started_and_no_later_one():
    """The server's process group is its members started no earlier than the server was: a later
    group that reuses the number is never signalled; ``stop_group`` ends the group it started."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        ticks = server.start_ticks(child.pid)
        assert ticks > 0 and server.alive(child.pid)
        assert server.group_members(child.pid, ticks) == [child.pid]
        assert server.group_members(child.pid, ticks + 1) == []  # "started after the server"
        server.stop_group(child.pid, ticks + 1)  # not the server's: left alone
        assert server.alive(child.pid)
        server.stop_group(child.pid, ticks)
        assert child.wait(timeout=10) == -15  # SIGTERM
        assert not server.alive(child.pid)
    finally:
        child.kill()


def test_tracking_server_config_reads_the_uri_start_prints(tmp_path, monkeypatch):
    from tests.compose import compose_evaluate

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = compose_evaluate(["tracking=server"], tmp_path)
    assert cfg.tracking.uri == f"http://127.0.0.1:{server.DEFAULT_PORT}"  # the server's default
    assert cfg.tracking.on_error == "fail" and cfg.tracking.artifact_location is None
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5123")
    assert compose_evaluate(["tracking=server"], tmp_path).tracking.uri == "http://127.0.0.1:5123"


@pytest.fixture
def restore_tracking_uri():
    import mlflow

    before = mlflow.get_tracking_uri()
    yield
    mlflow.set_tracking_uri(before)


def test_a_job_losing_the_race_to_create_the_experiment_uses_the_winners(
    tmp_path, monkeypatch, restore_tracking_uri
):
    """Parallel jobs on a server (no store lock there): both see no experiment, one creates it,
    the other's create is refused RESOURCE_ALREADY_EXISTS and it logs into the winner's."""
    import mlflow

    from rag_lab.tracking import MlflowTracker

    tracker = MlflowTracker(uri=f"sqlite:///{tmp_path}/m.db", experiment="shared")
    _, first = tracker.connect()  # the winner's experiment
    real = mlflow.get_experiment_by_name
    calls = []

    def not_yet(name):  # the loser's first look happened before the winner's create
        calls.append(name)
        return None if len(calls) == 1 else real(name)

    monkeypatch.setattr(mlflow, "get_experiment_by_name", not_yet)
    _, second = tracker.connect()
    assert second == first and len(calls) == 2


def test_a_dataset_another_job_just_logged_is_linked_on_the_second_try(
    tmp_path, monkeypatch, restore_tracking_uri
):
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from rag_lab.tracking import MlflowTracker

    tracker = MlflowTracker(uri=f"sqlite:///{tmp_path}/m.db", experiment="shared")
    run = tracker.start_run("job")
    real = MlflowClient.log_inputs
    calls = []

    def unique_violation_once(self, run_id, datasets=None, models=None):
        calls.append(run_id)
        if len(calls) == 1:  # what the server answers the slower of two jobs
            raise MlflowException('duplicate key value violates unique constraint "dataset_pk"')
        return real(self, run_id, datasets)

    monkeypatch.setattr(MlflowClient, "log_inputs", unique_violation_once)
    run.log_dataset("sample", "abc123", "/data/sample", "test", {"n_queries": 3})
    run.end()
    logged = MlflowClient(tracker.uri).get_run(run.run_id).inputs.dataset_inputs
    assert [d.dataset.digest for d in logged] == ["abc123"] and len(calls) == 2
