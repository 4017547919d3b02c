"""MLflow runs left RUNNING by a killed process (issue 32, item 9).

Before: ``kill -9`` of a sweep left its child runs RUNNING (the parents were closed by the next
sweep in the folder), and a killed single ``evaluate`` stayed RUNNING after a rerun, for ever.
Now every run is tagged with its process (host, pid, start time); the next run on the same store
marks ``KILLED`` the runs of its experiment whose process is gone, and ``rag-lab runs
close-stale`` does it for a whole store on demand. Real processes, really killed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from rag_lab.tracking import MlflowTracker
from rag_lab.tracking.stale import HOST_TAG, PID_TAG, START_TAG, process_start, stale
from tests.cli.helpers import ENV, cli, error_line
from tests.compose import TOY_OVERRIDES

OPEN_A_RUN = """
import sys, time
from rag_lab.tracking import MlflowTracker
run = MlflowTracker(sys.argv[1]).start_run("victim")
print(run.run_id, flush=True)
time.sleep(600)
"""


@pytest.fixture
def restore_tracking_uri():
    import mlflow

    before = mlflow.get_tracking_uri()
    yield
    mlflow.set_tracking_uri(before)


def run_of(uri: str, run_id: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri).get_run(run_id)


def open_a_run(uri: str) -> tuple[subprocess.Popen, str]:
    """A process that opened a run and is still working on it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", OPEN_A_RUN, uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line, proc.stderr.read() if proc.poll() is not None else "no run id"
    return proc, line


def kill_9(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.slow  # ~30 s under load: two processes importing MLflow
def test_the_next_run_closes_a_killed_processes_run_and_leaves_a_live_one(
    tmp_path, restore_tracking_uri
):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    dead, dead_id = open_a_run(uri)
    live, live_id = open_a_run(uri)
    try:
        kill_9(dead)
        assert run_of(uri, dead_id).info.status == "RUNNING"  # nothing of it ran on

        nxt = MlflowTracker(uri).start_run("next")
        killed = run_of(uri, dead_id)
        assert killed.info.status == "KILLED"
        assert killed.data.tags["ended"] == (
            f"process {dead.pid} on {socket.gethostname()} died before the run ended"
        )
        assert run_of(uri, live_id).info.status == "RUNNING"  # its process still works on it
        tags = run_of(uri, nxt.run_id).data.tags
        assert tags[HOST_TAG] == socket.gethostname() and tags[PID_TAG] == str(os.getpid())
        assert tags[START_TAG] == process_start(os.getpid())
        nxt.end("FINISHED")
    finally:
        live.kill()
        live.wait(timeout=60)

    # on demand: the command closes it in every experiment of the store
    ran = cli("runs", "close-stale", "--tracking-uri", uri)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [live_id]
    assert run_of(uri, live_id).info.status == "KILLED"
    again = cli("runs", "close-stale", "--tracking-uri", uri)
    assert again.returncode == 0 and again.stdout == ""
    assert run_of(uri, nxt.run_id).info.status == "FINISHED"  # a closed run stays as it was


@pytest.mark.slow  # ~30 s under load
def test_a_killed_evaluate_is_closed_by_the_rerun(tmp_path, restore_tracking_uri):
    """The issue's case through the real command: ``kill -9`` of ``rag-lab evaluate`` while its
    run is open, then the same command again."""
    exp = tmp_path / "exp"
    args = [*TOY_OVERRIDES, "retrievers=[bm25,dense]", f"paths.experiments={exp}"]
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rag_lab.cli", "evaluate", *args, "dataset=sample",
         "dataset.split=dev", f"hydra.run.dir={run_dir}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while not (run_dir / "mlflow_run_id").exists():  # written when the run opens
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    kill_9(proc)  # the sample's corpus is still being read and indexed
    killed_id = (run_dir / "mlflow_run_id").read_text()
    uri = f"sqlite:///{exp / 'mlflow.db'}"
    assert run_of(uri, killed_id).info.status == "RUNNING"

    ran = cli("evaluate", *args, "cache.dir=null", f"hydra.run.dir={tmp_path / 'rerun'}")
    assert ran.returncode == 0, ran.stderr
    assert run_of(uri, killed_id).info.status == "KILLED"  # was: RUNNING after the rerun


def test_a_run_whose_process_ended_is_closed_in_process(tmp_path, restore_tracking_uri):
    """The fast form of the above: a run whose pid tag names a process that has ended."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = MlflowTracker(uri)
    orphan = tracker.start_run("orphan")
    child = subprocess.Popen(["true"])
    child.wait()
    MlflowClient(uri).set_tag(orphan.run_id, PID_TAG, str(child.pid))
    mine = tracker.start_run("mine")  # this process: alive
    assert run_of(uri, orphan.run_id).info.status == "KILLED"
    assert run_of(uri, mine.run_id).info.status == "RUNNING"
    assert cli("runs", "close-stale", "--tracking-uri", uri).stdout == ""
    mine.end("FINISHED")


def test_close_stale_refuses_a_missing_store(tmp_path):
    ran = cli("runs", "close-stale", "--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}")
    assert ran.returncode == 2
    assert error_line(ran) == (
        f"error: no MLflow store at sqlite:///{tmp_path / 'none.db'} "
        f"({tmp_path / 'none.db'} does not exist)"
    )


def test_a_reused_pid_or_another_host(monkeypatch):
    """A pid alive now but started at another time is another process; another host's runs are
    not judged from here."""
    me, host = os.getpid(), socket.gethostname()

    def run(tags: dict[str, str]) -> SimpleNamespace:
        return SimpleNamespace(
            info=SimpleNamespace(status="RUNNING"), data=SimpleNamespace(tags=tags)
        )

    mine = {HOST_TAG: host, PID_TAG: str(me), START_TAG: process_start(me) or ""}
    assert not stale(run(mine), host)
    assert stale(run({**mine, START_TAG: "1"}), host)  # the pid was reused
    assert not stale(run({**mine, HOST_TAG: "elsewhere"}), host)
    assert not stale(run({HOST_TAG: host}), host)  # no pid tag: not one of ours
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert stale(run({**mine, PID_TAG: gone.stdout.strip()}), host)
