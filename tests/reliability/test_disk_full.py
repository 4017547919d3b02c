"""A full disk, an exhausted quota or a read-only folder during a run (issue 32, item 2).

Before: ``OSError: [Errno 28]`` with a traceback from ``write_scores`` (exit 1), a truncated
16,384-byte ``metrics.json``, and on a disk already full Hydra's own traceback from
``_save_config``. Now every run output is written atomically (``rag_lab.io.atomic``), the error
is one line naming the file (exit 2), and the stage cache keeps what finished.

Two ways to fill a disk: a real one (a 48 KiB tmpfs, mounted here when the test runs as root
and may mount; skipped with the reason otherwise), and ``os.fsync`` made to fail with ENOSPC
for one file name in-process (where a full disk surfaces for a buffered write), which runs
everywhere.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_lab.errors import DiskError
from rag_lab.io import atomic
from rag_lab.io.atomic import atomic_open, write_atomic
from tests.cli.helpers import cli, error_line, rag_lab
from tests.compose import TOY

TOY_RUN = (
    "evaluate",
    "dataset=beir",
    f"dataset.path={TOY}",
    "embedder=hashing",
    "retrievers=[bm25,dense]",
    "tracking=none",
)


def leftovers(folder: Path) -> list[Path]:
    return sorted(folder.rglob(f"*{atomic.TEMP_SUFFIX}"))


def fail_fsync_for(monkeypatch: pytest.MonkeyPatch, name: str, code: int = errno.ENOSPC) -> None:
    """``os.fsync`` of a file whose temporary is named after ``name`` raises ``OSError(code)``."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if Path(os.readlink(f"/proc/self/fd/{fd}")).name.startswith(f".{name}."):
            raise OSError(code, os.strerror(code))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


# -- the writer ------------------------------------------------------------------------------


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "metrics.json"
    write_atomic(target, '{"ndcg_at_10": 0.5}')
    fail_fsync_for(monkeypatch, "metrics.json")
    with pytest.raises(DiskError) as info:
        write_atomic(target, '{"ndcg_at_10": 0.7}' + " " * 100_000)
    assert str(info.value).startswith(f"cannot write {target}: no space left on device")
    assert json.loads(target.read_text()) == {"ndcg_at_10": 0.5}
    assert leftovers(tmp_path) == []


def test_an_error_inside_the_block_writes_nothing(tmp_path):
    target = tmp_path / "run.trec"
    with pytest.raises(RuntimeError), atomic_open(target) as fh:
        fh.write("q1 Q0 d1 1 1.0 x\n")
        raise RuntimeError("the writer's own bug")
    assert not target.exists()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS])
def test_each_disk_errno_is_a_disk_error(tmp_path, monkeypatch, code):
    fail_fsync_for(monkeypatch, "report.html", code)
    with pytest.raises(DiskError, match=f"report.html: {os.strerror(code).lower()}"):
        write_atomic(tmp_path / "report.html", "<html></html>")


def test_other_os_errors_are_not_disk_errors(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(OSError) as info:
        write_atomic(blocker / "metrics.json", "{}")
    assert not isinstance(info.value, DiskError) and info.value.errno == errno.EEXIST


# -- a run, in-process -----------------------------------------------------------------------


def metrics_of(run_dir: Path) -> dict[str, float]:
    return json.loads((run_dir / "metrics.json").read_text())


def test_full_disk_at_metrics_json_is_one_line_and_the_rerun_reads_the_cache(tmp_path, monkeypatch):
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    args = (*TOY_RUN, f"cache.dir={cache}", f"hydra.run.dir={run_dir}")
    with monkeypatch.context() as patch:
        fail_fsync_for(patch, "metrics.json")
        ran = cli(*args)
    assert ran.returncode == 2, ran.stderr
    assert error_line(ran).startswith(
        f"error: cannot write {run_dir / 'metrics.json'}: no space left on device"
    )
    assert not (run_dir / "metrics.json").exists()  # never a truncated one
    assert (run_dir / "per_query.parquet").is_file()  # written before it, whole
    assert leftovers(run_dir) == []

    again = cli(*args)
    assert again.returncode == 0, again.stderr
    metrics = metrics_of(run_dir)
    # everything the first run finished is read back (chunks, each retriever's run): nothing
    # computed twice, nothing written to the cache again
    assert metrics["cache/chunks/hits"] == 1 and metrics["cache/runs/hits"] == 2
    assert metrics["cache_misses"] == 0 and metrics["cache_bytes_written"] == 0


def test_hydra_config_on_a_full_disk_is_one_line(tmp_path, monkeypatch):
    """Hydra writes ``.hydra/config.yaml`` before the task runs (outside ``user_errors``)."""
    run_dir = tmp_path / "run"
    fail_fsync_for(monkeypatch, "config.yaml")
    ran = cli(*TOY_RUN, "cache.dir=null", f"hydra.run.dir={run_dir}")
    assert ran.returncode == 2, ran.stderr
    target = run_dir / ".hydra" / "config.yaml"
    assert error_line(ran).startswith(f"error: cannot write {target}: no space left on device")
    assert not target.exists()


# -- a real small disk -----------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 KiB tmpfs (root only; unmounted afterwards)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def remount(mnt: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mnt)], check=True)


def test_a_run_on_a_48k_tmpfs(small_disk, tmp_path):
    """The issue's case: the run folder fills up mid-run. Then space is freed (the tmpfs grown)
    and the same command reruns from the cache (on another disk) to the same scores."""
    run_dir, cache = small_disk / "run", tmp_path / "cache"
    args = (*TOY_RUN, f"cache.dir={cache}", f"hydra.run.dir={run_dir}")
    # Hydra's files, the resolved config and the log fit in 48 KiB (tmpfs counts 4 KiB pages),
    # the scores do not
    proc = rag_lab(*args)
    assert proc.returncode == 2, proc.stderr
    line = error_line(proc)
    assert line.startswith(f"error: cannot write {run_dir}/"), line
    assert "no space left on device" in line
    if (run_dir / "metrics.json").exists():  # written whole before the disk filled, or not at all
        json.loads((run_dir / "metrics.json").read_text())
    assert leftovers(run_dir) == []

    remount(small_disk, "size=4m")
    again = rag_lab(*args)
    assert again.returncode == 0, again.stderr
    metrics = metrics_of(run_dir)
    assert metrics["cache/runs/hits"] == 2
    assert metrics["cache_misses"] == 0 and metrics["cache_bytes_written"] == 0


def test_a_disk_already_full_and_a_read_only_one(small_disk):
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={small_disk / 'filler'}", "bs=4k"], capture_output=True
    )
    args = (*TOY_RUN, "cache.dir=null")
    full = rag_lab(*args, f"hydra.run.dir={small_disk / 'run'}")
    assert full.returncode == 2, full.stderr
    assert error_line(full).startswith(
        f"error: cannot write {small_disk / 'run' / '.hydra' / 'config.yaml'}: "
        "no space left on device"
    )
    remount(small_disk, "ro")
    ro = rag_lab(*args, f"hydra.run.dir={small_disk / 'run2'}")
    assert ro.returncode == 2, ro.stderr
    assert "read-only file system" in error_line(ro)


def test_the_run_log_stops_with_one_warning_on_a_full_disk(tmp_path, capsys):
    """Hydra's job log is ``RunLogFile`` (conf/hydra/default.yaml): a full disk is one warning,
    not ``logging``'s "--- Logging error ---" traceback for every record after it."""
    import logging

    from rag_lab.report.console import RunLogFile

    handler = RunLogFile(str(tmp_path / "evaluate.log"))
    logger = logging.getLogger("tests.reliability.run_log")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("first")
        handler.flush()

        def full(_: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        handler.stream.write = full  # type: ignore[method-assign]
        for i in range(3):
            logger.warning("lost %d", i)
    finally:
        logger.removeHandler(handler)
        handler.close()
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"warning: the run log {tmp_path / 'evaluate.log'} stops here: no space left on device"
    ]
    assert (tmp_path / "evaluate.log").read_text().count("first") == 1


# -- SQLite's own "database or disk is full" (the MLflow store, the stage cache) ------------------


def _write_until_full(db: Path) -> None:
    import sqlite3

    con = sqlite3.connect(db)
    con.execute("create table t (x blob)")
    for _ in range(1000):
        con.execute("insert into t values (?)", (b"x" * 4096,))
        con.commit()


def test_a_full_sqlite_database_is_one_line(tmp_path, small_disk, capsys):
    """A store on a full disk fails as sqlite3.OperationalError (not an OSError): one line, exit 2,
    also when a library re-raises it wrapped (MLflow's store, SQLAlchemy)."""
    from rag_lab.errors import full_database, user_errors

    with pytest.raises(Exception) as raised:
        _write_until_full(small_disk / "mlflow.db")
    assert full_database(raised.value) == "database or disk is full"

    class StoreError(Exception):
        pass

    @user_errors
    def tracked_run() -> None:
        try:
            _write_until_full(small_disk / "other.db")
        except Exception as exc:
            raise StoreError("could not log the run") from exc

    with pytest.raises(SystemExit) as stopped:
        tracked_run()
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1
    assert err.startswith(
        "error: a SQLite database could not be written (database or disk is full)"
    )


def test_other_sqlite_errors_still_propagate():
    import sqlite3

    from rag_lab.errors import user_errors

    @user_errors
    def broken() -> None:
        raise sqlite3.OperationalError("no such table: runs")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        broken()
