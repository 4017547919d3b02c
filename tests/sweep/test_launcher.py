"""rag_lab's multirun launcher (``hydra/launcher=fork``, rag_lab/sweep/launcher.py): scheduling,
and whole sweeps through the CLI on the toy dataset against the same sweep run in one process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rag_lab.runtime.threads import usable_cpus
from rag_lab.sweep.launcher import blocks, take, worker_count
from rag_lab.validate import OptionError
from tests.sweep.test_sweep_cli import ENV, sweep, sweep_command

CALLBACKS = "tests.sweep.job_callbacks"
BM25_GRID = ("dataset.split=dev", "sweep.report_winner=false", "retrievers=[bm25]", "tracking=none")


def test_blocks_are_contiguous_and_a_worker_steals_the_tail_of_the_longest():
    assert blocks(7, 2) == [(0, 4), (4, 7)]
    assert blocks(2, 3) == [(0, 1), (1, 2), (2, 2)]
    bounds = [x for b in blocks(7, 2) for x in b]
    assert [take(1, bounds) for _ in range(3)] == [4, 5, 6]
    assert take(1, bounds) == 3  # its block is done: the last job of worker 0's
    assert [take(0, bounds) for _ in range(4)] == [0, 1, 2, None]
    assert take(1, bounds) is None


def test_worker_count():
    assert worker_count("auto", 100) == usable_cpus()
    assert worker_count("auto", 1) == 1
    assert worker_count(8, 3) == 3
    for bad in (0, -1, True, "two", 1.5):
        with pytest.raises(OptionError, match="hydra.launcher.workers"):
            worker_count(bad, 3)


def _jobs(folder: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(folder.glob("*/metrics.json"))}


def _scores(metrics: dict[str, dict]) -> dict[str, dict]:
    keep = ("ndcg_at_10", "recall_at_10", "mrr_at_10", "hit_rate_at_5", "n_queries", "n_chunks")
    return {job: {k: m[k] for k in keep} for job, m in metrics.items()}


def test_forked_jobs_match_the_jobs_run_in_one_process(tmp_path):
    grid = (*BM25_GRID, "retrievers.bm25.k1=0.6,0.9,1.2,1.5")
    record = f"+hydra.callbacks.proc._target_={CALLBACKS}.RecordProcess"
    one = sweep(tmp_path, *grid, record, "hydra.launcher.workers=1", name="one")
    assert one.returncode == 0, one.stderr[-3000:]
    two = sweep(tmp_path, *grid, record, "hydra.launcher.workers=2", name="two")
    assert two.returncode == 0, two.stderr[-3000:]
    assert sorted(_jobs(tmp_path / "two")) == ["0", "1", "2", "3"]
    assert _scores(_jobs(tmp_path / "two")) == _scores(_jobs(tmp_path / "one"))
    for name, workers in (("one", 1), ("two", 2)):
        sweep_pid = int((tmp_path / name / "sweep_pid").read_text())
        procs = [json.loads(p.read_text()) for p in (tmp_path / name).glob("*/process.json")]
        pids = {p["pid"] for p in procs}
        if workers == 1:  # Hydra's basic launcher: every job in the sweep's process
            assert pids == {sweep_pid}
        else:  # two forked workers, each with its share of the cores' threads (all of them
            # once the other has finished: rag_lab.runtime.threads)
            assert len(pids) == 2 and sweep_pid not in pids
            assert {p["ppid"] for p in procs} == {sweep_pid}
            shares = {str(max(1, usable_cpus() // 2)), str(usable_cpus())}
            assert {p["omp"] for p in procs} <= shares
    # the leaderboard and page of the sweep's end read the workers' job folders
    board = (tmp_path / "two" / "report" / "leaderboard.csv").read_text()
    assert len(board.strip().splitlines()) == 5
    assert (tmp_path / "two" / "report.html").is_file()


def test_a_bad_override_stops_the_sweep_before_any_job_runs(tmp_path):
    for workers in (1, 2):
        proc = sweep(
            tmp_path,
            *BM25_GRID,
            "chunker=recursive,no_such_chunker",
            f"hydra.launcher.workers={workers}",
            name=f"w{workers}",
        )
        assert proc.returncode == 1
        assert "Could not find 'chunker/no_such_chunker'" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert not list((tmp_path / f"w{workers}").glob("*/metrics.json"))


def test_a_job_that_refuses_its_config_exits_2_and_keeps_the_finished_jobs(tmp_path):
    # job 1 (retrieve_k=-3) is refused with the one-line error; job 0 finishes either way
    proc = sweep(tmp_path, *BM25_GRID, "evaluation.retrieve_k=10,-3", "hydra.launcher.workers=2")
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "retrieve_k" in errors[0]
    assert "Traceback" not in proc.stderr
    assert sorted(_jobs(tmp_path / "sweep")) == ["0"]


def test_a_worker_killed_mid_job_fails_that_job_and_the_other_worker_runs_the_rest(tmp_path):
    proc = sweep(
        tmp_path,
        *BM25_GRID,
        "retrievers.bm25.k1=0.6,0.9,1.2,1.5",
        "hydra.launcher.workers=2",
        f"+hydra.callbacks.kill._target_={CALLBACKS}.KillJob",
        "+hydra.callbacks.kill.num=0",
    )
    assert proc.returncode != 0
    assert "exited with code -9 while running job #0" in proc.stderr
    # worker 0 died on job 0; worker 1 ran its block (2, 3), then job 1 from worker 0's
    assert sorted(_jobs(tmp_path / "sweep")) == ["1", "2", "3"]


def _held_sweep(tmp_path: Path, seconds: float) -> list[str]:
    store = f"sqlite:///{tmp_path / 'exp' / 'mlflow.db'}"
    return sweep_command(
        tmp_path,
        "dataset.split=dev",
        "sweep.report_winner=false",
        "retrievers=[bm25]",
        "retrievers.bm25.k1=0.6,0.9,1.2,1.5",
        f"tracking.uri={store}",
        "hydra.launcher.workers=2",
        f"+hydra.callbacks.hold._target_={CALLBACKS}.HoldJob",
        f"+hydra.callbacks.hold.seconds={seconds}",
    )


def _when_both_started(proc: subprocess.Popen, sweep_dir: Path) -> list[int]:
    deadline = time.monotonic() + 120
    while len(list(sweep_dir.glob("started.*"))) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-3000:]
        time.sleep(0.05)
    return [int(p.suffix[1:]) for p in sweep_dir.glob("started.*")]


def test_ctrl_c_stops_every_worker_and_marks_the_sweep_killed(tmp_path):
    from tests.sweep.test_sweep_cli import runs

    cmd = _held_sweep(tmp_path, 60)
    # a new session, as a terminal's foreground job: Ctrl-C is SIGINT to the whole group, and
    # SIGINT is not ignored (it is when pytest itself was started as a background job: `cmd &`)
    proc = subprocess.Popen(
        cmd,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    workers = _when_both_started(proc, tmp_path / "sweep")
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=60)
    assert time.monotonic() - t0 < 10  # the workers stop with the sweep, not after their jobs
    assert proc.returncode != 0
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    _, parents, _ = runs(tmp_path)
    assert [p.info.status for p in parents] == ["KILLED"]
    assert not list((tmp_path / "sweep").glob("*/metrics.json"))


def test_a_sweep_that_ignores_sigint_has_workers_that_ignore_it(tmp_path):
    # started in the background by a script: SIGINT ignored, so it must not end any job
    proc = subprocess.Popen(
        _held_sweep(tmp_path, 1),
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    _when_both_started(proc, tmp_path / "sweep")
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert sorted(_jobs(tmp_path / "sweep")) == ["0", "1", "2", "3"]


def test_workers_print_an_identical_error_line_once():
    import multiprocessing as mp

    from rag_lab.sweep.launcher import SAID_SLOTS, _said_before

    ctx = mp.get_context("fork")
    said, lock = ctx.RawArray("q", SAID_SLOTS), ctx.Lock()
    assert not _said_before(said, lock, "optimized_metric=noise_ratio@5: add a floor")
    assert _said_before(said, lock, "optimized_metric=noise_ratio@5: add a floor")
    assert not _said_before(said, lock, "dataset.split=test: not a selection split")
    for i in range(SAID_SLOTS):  # full: every further distinct line still prints
        _said_before(said, lock, f"line {i}")
    assert not _said_before(said, lock, "one more") and not _said_before(said, lock, "one more")


@pytest.fixture
def global_hydra():
    """Hydra's global state, cleared after the test (``_sweep_jobs`` initialises it)."""
    from hydra.core.global_hydra import GlobalHydra

    yield
    GlobalHydra.instance().clear()


def _sweep_jobs(overrides_per_job: list[list[str]], swept: list[str]):
    """rag_lab's launcher's jobs of a multirun of ``evaluate`` (the master config composed as
    ``-m`` composes it, with ``swept`` as the sweep's overrides), not run."""
    from hydra._internal.callbacks import Callbacks
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import HydraContext, RunMode

    from hydra_plugins.rag_lab_launcher.fork_launcher import ForkLauncher
    from rag_lab.paths import CONFIG_DIR
    from rag_lab.sweep.launcher import _Jobs

    GlobalHydra.instance().clear()
    hydra = Hydra.create_main_hydra2("evaluate", create_config_search_path(CONFIG_DIR))
    master = hydra.compose_config("evaluate", swept, run_mode=RunMode.MULTIRUN)
    launcher = ForkLauncher(workers=1)
    context = HydraContext(config_loader=hydra.config_loader, callbacks=Callbacks())
    launcher.setup(hydra_context=context, task_function=lambda cfg: None, config=master)
    return _Jobs(launcher, overrides_per_job, 0), hydra.config_loader, master


def test_a_value_sweep_derives_each_jobs_config_equal_to_its_composition(monkeypatch, global_hydra):
    """A sweep over plain values composes its first job only; every other job's config (Hydra's
    node included) equals what composing it gives."""
    from omegaconf import OmegaConf, open_dict

    base = ["dataset=sample", "embedder=hashing", "+fusion.weights.dense=0.5"]
    grid = [(k, d) for k in (10, 60) for d in ("0.5", "2.0")]
    jobs_overrides = [
        [*base[:2], f"fusion.k={k}", f"+fusion.weights.dense={d}", "evaluation.retrieve_k=50"]
        for k, d in grid
    ]
    swept = [*base[:2], "fusion.k=10,60", "+fusion.weights.dense=0.5,2.0"]
    swept.append("evaluation.retrieve_k=50")
    jobs, loader, master = _sweep_jobs(jobs_overrides, swept)
    assert jobs.derivable()
    composed = []
    for pos, overrides in enumerate(jobs_overrides):
        cfg = loader.load_sweep_config(master, overrides)
        with open_dict(cfg):
            cfg.hydra.job.id = cfg.hydra.job.num = pos
        composed.append(OmegaConf.to_yaml(cfg))
    calls = []
    real = type(loader).load_sweep_config
    monkeypatch.setattr(
        type(loader), "load_sweep_config", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    derived = [OmegaConf.to_yaml(jobs.compose(pos)) for pos in range(len(jobs_overrides))]
    assert len(calls) == 1  # the first job; the other three derived from it
    assert derived == composed
    assert [jobs.compose(p).fusion.k for p in range(4)] == [10, 10, 60, 60]
    assert [jobs.compose(p).fusion.weights.dense for p in range(4)] == [0.5, 2.0, 0.5, 2.0]
    assert jobs.compose(3).hydra.job.override_dirname.count("fusion.k=60") == 1


def test_a_sweep_of_values_composes_no_job(monkeypatch, global_hydra):
    """``key=a,b`` sweeps only: every job's config is the multirun's own with its values set,
    equal to what composing the job gives."""
    from omegaconf import OmegaConf, open_dict

    jobs_overrides = [
        ["dataset=sample", "embedder=hashing", f"fusion.k={k}", f"evaluation.retrieve_k={r}"]
        for k in (10, 60)
        for r in (50, 100)
    ]
    swept = ["dataset=sample", "embedder=hashing", "fusion.k=10,60", "evaluation.retrieve_k=50,100"]
    jobs, loader, master = _sweep_jobs(jobs_overrides, swept)
    composed = []
    for pos, overrides in enumerate(jobs_overrides):
        cfg = loader.load_sweep_config(master, overrides)
        with open_dict(cfg):
            cfg.hydra.job.id = cfg.hydra.job.num = pos
        composed.append(OmegaConf.to_yaml(cfg))
    before = OmegaConf.to_yaml(master)
    calls = []
    real = type(loader).load_sweep_config
    monkeypatch.setattr(
        type(loader), "load_sweep_config", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    assert [OmegaConf.to_yaml(jobs.compose(p)) for p in range(4)] == composed
    assert calls == [] and OmegaConf.to_yaml(master) == before  # the multirun's config intact
    assert [jobs.compose(p).evaluation.retrieve_k for p in range(4)] == [50, 100, 50, 100]


def test_a_group_sweep_is_composed_job_by_job(global_hydra):
    from rag_lab.sweep.launcher import value_changes

    jobs_overrides = [["dataset=sample", f"chunker={c}"] for c in ("none", "recursive")]
    jobs, loader, _ = _sweep_jobs(jobs_overrides, ["dataset=sample", "chunker=none,recursive"])
    assert not jobs.derivable()
    repo = loader.repository
    assert value_changes(repo, ["fusion.k=1"], ["fusion.k=2"]) is not None
    assert value_changes(repo, ["chunker=none"], ["chunker=recursive"]) is None  # a group
    assert value_changes(repo, ["a.b=1", "a=2"], ["a.b=3", "a=2"]) is None  # its parent too
    assert value_changes(repo, ["x=[1]"], ["x=[2]"]) is None  # not a scalar
    assert value_changes(repo, ["x=1"], ["~x"]) is None
