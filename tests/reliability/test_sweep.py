"""Sweep faults (issue 13): a killed sweep's MLflow parent is never left RUNNING (marked KILLED
on a signal or by the next sweep in the same folder, FAILED on an early exit); a ``winner.json``
whose ``job`` leaves the sweep folder is refused by name."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.cli.helpers import ENV, cli, error_line


def sweep_config(sweep_dir: Path, db: Path):
    """What ``on_multirun_start`` reads of a multirun's composed config."""
    return OmegaConf.create(
        {
            "dataset": {"split": "dev"},
            "optimized_metric": "ndcg@10",
            "tracking": {
                "_target_": "rag_lab.tracking.MlflowTracker",
                "uri": f"sqlite:///{db}",
                "experiment": "rag_lab",
            },
            "hydra": {"sweep": {"dir": str(sweep_dir)}, "overrides": {"task": ["x=1,2"]}},
        }
    )


def status(db: Path, run_id: str) -> str:
    from mlflow.tracking import MlflowClient

    return MlflowClient(f"sqlite:///{db}").get_run(run_id).info.status


def parent_id(sweep_dir: Path) -> str:
    return json.loads((sweep_dir / "sweep_parent.json").read_text())["run_id"]


@pytest.fixture
def restore_tracking_uri():
    import mlflow

    before = mlflow.get_tracking_uri()
    yield
    mlflow.set_tracking_uri(before)


# ------------------------------------------------------------------ the parent run


SCRIPT = """
import os, signal, sys
from pathlib import Path
from omegaconf import OmegaConf
from rag_lab.sweep.callback import MlflowSweepCallback
sweep_dir, db, how = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
# a sweep started from a terminal, whatever the test runner's own dispositions (a job run in the
# background by a script inherits SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
if how == "ignored":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    how = "SIGINT"
cfg = OmegaConf.create({
    "dataset": {"split": "dev"}, "optimized_metric": "ndcg@10",
    "tracking": {"_target_": "rag_lab.tracking.MlflowTracker", "uri": "sqlite:///" + db},
    "hydra": {"sweep": {"dir": str(sweep_dir)}, "overrides": {"task": ["x=1,2"]}}})
MlflowSweepCallback().on_multirun_start(cfg)
print("started", flush=True)
if how == "exit":
    sys.exit(1)  # a job raised: Hydra exits before on_multirun_end
os.kill(os.getpid(), getattr(signal, how))
signal.pause()
"""


def stop_a_sweep(sweep_dir: Path, db: Path, how: str) -> subprocess.CompletedProcess:
    """A sweep process that opens its parent run (the callback's own code path), then stops:
    ``how`` is a signal name, or ``exit`` (a job raised: Hydra exits before
    ``on_multirun_end``)."""
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(sweep_dir), str(db), how],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )


def test_next_sweep_in_the_folder_marks_a_killed_sweeps_parent_killed(
    tmp_path, restore_tracking_uri
):
    from mlflow.tracking import MlflowClient

    from rag_lab.sweep.callback import MlflowSweepCallback

    sweep_dir, db = tmp_path / "sweep", tmp_path / "mlflow.db"
    proc = stop_a_sweep(sweep_dir, db, "SIGKILL")  # nothing of the dying sweep runs
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    old = parent_id(sweep_dir)
    assert status(db, old) == "RUNNING"

    again = MlflowSweepCallback()  # the sweep restarted in the same sweep dir
    again.on_multirun_start(sweep_config(sweep_dir, db))
    new = parent_id(sweep_dir)
    assert new != old
    assert status(db, old) == "KILLED"  # was: RUNNING for ever
    assert status(db, new) == "RUNNING"
    assert MlflowClient(f"sqlite:///{db}").get_run(new).data.tags["previous_parent"] == old
    again.on_multirun_end(sweep_config(sweep_dir, db))
    assert status(db, new) == "FAILED"  # no job finished (was: left RUNNING too)

    third = MlflowSweepCallback()  # a closed parent is left as it is
    third.on_multirun_start(sweep_config(sweep_dir, db))
    third.on_multirun_end(sweep_config(sweep_dir, db))
    assert status(db, new) == "FAILED" and status(db, old) == "KILLED"


@pytest.mark.parametrize(
    "how,want,rc",
    [
        ("SIGTERM", "KILLED", -signal.SIGTERM),
        ("SIGINT", "KILLED", -signal.SIGINT),
        ("exit", "FAILED", 1),
    ],
)
def test_a_sweep_stopped_midway_closes_its_parent(tmp_path, how, want, rc):
    sweep_dir, db = tmp_path / "sweep", tmp_path / "mlflow.db"
    proc = stop_a_sweep(sweep_dir, db, how)
    assert "started" in proc.stdout, proc.stderr[-2000:]
    assert proc.returncode == rc, proc.stderr[-2000:]  # the signal keeps its usual effect
    assert status(db, parent_id(sweep_dir)) == want  # was: RUNNING


def test_an_ignored_sigint_stays_ignored(tmp_path):
    """A sweep started with SIGINT ignored (in the background by a script) is not ended by it,
    so its parent is not closed KILLED by it either: the run ends normally (here: FAILED, as the
    script exits without on_multirun_end). It once hung: the guard's handler swallowed it."""
    sweep_dir, db = tmp_path / "sweep", tmp_path / "mlflow.db"
    script = SCRIPT.replace("signal.pause()", "sys.exit(1)")
    proc = subprocess.run(
        [sys.executable, "-c", script, str(sweep_dir), str(db), "ignored"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert "started" in proc.stdout and proc.returncode == 1, proc.stderr[-2000:]
    assert status(db, parent_id(sweep_dir)) == "FAILED"


# ------------------------------------------------------------------ winner.json


def make_sweep(tmp_path: Path) -> Path:
    sweep_dir = tmp_path / "sweep"
    (sweep_dir / "0").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "metrics.json").write_text("{}")
    return sweep_dir


@pytest.mark.parametrize("job", ["../other", "0/../../other", "/etc", ".", "", None, ["0"]])
def test_winner_job_outside_the_sweep_folder_is_refused(tmp_path, job):
    from rag_lab.errors import ConfigError
    from rag_lab.sweep.winner import read_winner

    sweep_dir = make_sweep(tmp_path)
    (sweep_dir / "winner.json").write_text(json.dumps({"job": job}))
    with pytest.raises(ConfigError) as err:
        read_winner(sweep_dir)
    assert str(err.value).startswith(f"{sweep_dir / 'winner.json'}: job {job!r} ")


def test_winner_job_linking_out_of_the_sweep_folder_is_refused(tmp_path):
    from rag_lab.errors import ConfigError
    from rag_lab.sweep.winner import read_winner

    sweep_dir = make_sweep(tmp_path)
    os.symlink(tmp_path / "other", sweep_dir / "1")
    (sweep_dir / "winner.json").write_text(json.dumps({"job": "1"}))
    with pytest.raises(ConfigError, match="job '1' has no folder in"):
        read_winner(sweep_dir)


def test_winner_job_inside_the_sweep_folder_is_read(tmp_path):
    from rag_lab.sweep.winner import read_winner

    sweep_dir = make_sweep(tmp_path)
    (sweep_dir / "winner.json").write_text(json.dumps({"job": "0", "ndcg_at_10": 0.5}))
    winner, job = read_winner(sweep_dir)
    assert job == sweep_dir / "0" and winner["ndcg_at_10"] == 0.5


def test_trials_are_read_from_job_folders_not_links_out(tmp_path):
    from rag_lab.report.leaderboard import load_trials

    sweep_dir = make_sweep(tmp_path)
    os.symlink(tmp_path / "other", sweep_dir / "1")  # has a metrics.json, outside the sweep
    assert load_trials(sweep_dir) == []


def test_export_sweep_refuses_a_winner_outside_the_sweep_folder(tmp_path):
    sweep_dir = make_sweep(tmp_path)
    (sweep_dir / "winner.json").write_text(json.dumps({"job": "../other"}))
    proc = cli("export", "--sweep", str(sweep_dir), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    line = error_line(proc)
    assert line == (
        f"error: {sweep_dir / 'winner.json'}: job '../other' is not the name of a job folder "
        f"in {sweep_dir}"
    )
    assert not (tmp_path / "out").exists()


def test_rag_lab_sweep_terminated_midway_marks_its_parent_killed(tmp_path):
    """The real CLI: SIGTERM to ``rag-lab evaluate -m`` while its first job runs."""
    import time

    from tests.compose import TOY_OVERRIDES

    sweep_dir, db = tmp_path / "sweep", tmp_path / "exp" / "mlflow.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rag_lab.cli",
            "evaluate",
            "-m",
            *TOY_OVERRIDES,
            "dataset.split=dev",
            "retrievers=[bm25],[dense]",
            f"hydra.sweep.dir={sweep_dir}",
            f"paths.experiments={tmp_path / 'exp'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    deadline = time.monotonic() + 120
    while not (sweep_dir / "sweep_parent.json").exists() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM, err[-2000:]
    assert status(db, parent_id(sweep_dir)) == "KILLED"  # was: RUNNING
    assert not (sweep_dir / "winner.json").exists()
