"""Stage-cache faults (issue 13): an unwritable or full cache folder, corrupt cached indexes,
killed writers' temporaries; and what must keep working: the same config twice gives the same
metrics and rankings, and cached results equal recomputed ones.

Tests run as root here, where ``chmod`` does not stop writes, so a read-only folder is simulated
by a cache path under a regular file (``cache.dir=<file>/sub``: every mkdir fails with
ENOTDIR, as any unwritable path does), and a full disk by making ``os.replace`` into the cache
raise ``OSError(ENOSPC)`` in-process (the write itself succeeds; the failure is injected where a
full disk surfaces for the cache: committing the entry).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rag_lab.cache import CacheError, clear, inventory, open_cache
from rag_lab.cache import store as store_mod
from rag_lab.evaluate import evaluate
from tests.cli.helpers import Ran, cli, error_line, rag_lab
from tests.compose import TOY, TOY_OVERRIDES, compose_evaluate

HYBRID = [*TOY_OVERRIDES, "retrievers=[dense,bm25]", "tracking=none"]
# what a run measures about itself rather than about the rankings
VOLATILE = ("seconds", "_ms", "per_second", "cache", "embedded_chunks", "index_loaded")


def scores(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not any(s in k for s in VOLATILE)}


def run(tmp_path: Path, name: str, cache: Path | None, *extra: str) -> tuple[dict, pd.DataFrame]:
    """One in-process evaluate of the hybrid toy pipeline: its metrics and per-query table."""
    cache_dir = f"cache.dir={cache}" if cache else "cache.dir=null"
    cfg = compose_evaluate([*HYBRID, cache_dir, *extra], tmp_path / name)
    metrics = evaluate(cfg)
    return metrics, pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet")


def forget_runs(cache: Path) -> None:
    """Drop the cached runs, whole and per query (a new process then opens the cache)."""
    for runs in (cache / "runs").rglob("*.json.gz"):
        runs.unlink()
    store_mod._OPEN.clear()
    clear(cache, ["query_runs"])


def evaluate_cli(tmp_path: Path, cache_dir: str, *extra: str) -> Ran:
    return cli(
        "evaluate",
        "dataset=beir",
        f"dataset.path={TOY}",
        "embedder=hashing",
        "tracking=none",
        f"cache.dir={cache_dir}",
        f"hydra.run.dir={tmp_path / 'run'}",
        *extra,
    )


# -- an unwritable cache folder ------------------------------------------------------------------


def test_unwritable_cache_dir_is_one_line_naming_the_path(tmp_path):
    """Before: a NotADirectoryError traceback (exit 1) from the first write, after parsing."""
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    proc = evaluate_cli(tmp_path, f"{blocker}/sub")
    assert proc.returncode == 2, proc.stderr
    line = error_line(proc)
    assert line.startswith(f"error: cache.dir={blocker}/sub: cannot write {blocker}/sub (")
    assert "cache.on_error=bypass" in line
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_bypass_runs_on_without_the_cache_and_says_so_once(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    proc = evaluate_cli(tmp_path, f"{blocker}/sub", "cache.on_error=bypass")
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if "running on without the cache" in ln]
    assert len(warnings) == 1 and f"{blocker}/sub" in warnings[0], proc.stderr
    got = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert got["cache_bytes_written"] == 0 and got["cache_hits"] == 0
    plain, _ = run(tmp_path, "plain", None, "retrievers=[bm25]")  # the CLI's default retrievers
    assert got["ndcg_at_10"] == plain["ndcg_at_10"]


@pytest.fixture
def full_disk(monkeypatch, tmp_path):
    """``os.replace`` into ``tmp_path/cache`` fails with ENOSPC (simulated; see the module
    docstring); elsewhere (run folder outputs) it works."""
    real = os.replace
    cache = (tmp_path / "cache").resolve()

    def replace(src, dst, *args, **kwargs):
        if Path(dst).resolve().is_relative_to(cache):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    return cache


def test_full_disk_fails_with_the_entry_path(tmp_path, full_disk):
    with pytest.raises(CacheError) as info:
        run(tmp_path, "full", full_disk)
    message = str(info.value)
    assert "\n" not in message and "No space left on device" in message
    # the first entry a run writes is its documents (JSON lines are parsed each time, not
    # cached per file: rag_lab.parser.base.Plain)
    assert message.startswith(f"cache.dir={full_disk}: cannot write {full_disk}/documents/")
    assert not any(p.name.endswith(".tmp") for p in full_disk.rglob("*"))  # no temp left behind


def test_full_disk_with_bypass_warns_once_and_scores_as_without_cache(tmp_path, full_disk, caplog):
    with caplog.at_level(logging.WARNING, logger="rag_lab.cache.store"):
        bypassed, table = run(tmp_path, "full", full_disk, "cache.on_error=bypass")
    warnings = [r for r in caplog.records if "running on without the cache" in r.getMessage()]
    assert len(warnings) == 1 and "No space left on device" in warnings[0].getMessage()
    plain, plain_table = run(tmp_path, "plain", None)
    assert scores(bypassed) == scores(plain)
    pd.testing.assert_frame_equal(table, plain_table)


# -- a corrupt cached index ----------------------------------------------------------------------


def test_corrupt_cached_indexes_are_misses_rebuilt_with_a_warning(tmp_path, caplog):
    """Before: faiss' RuntimeError (truncated index.faiss) or numpy's ValueError (garbage bm25s
    matrix) as a traceback; the entry stayed and failed every later run the same way."""
    cache = tmp_path / "cache"
    cold, cold_table = run(tmp_path, "cold", cache)
    forget_runs(cache)  # so the next run must load the indexes
    (faiss_file,) = cache.glob("indexes/*/*/index.faiss")
    faiss_file.write_bytes(faiss_file.read_bytes()[:300])
    (matrix,) = cache.glob("indexes/*/*/bm25s/data.csc.index.npy")
    matrix.write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING, logger="rag_lab.cache.store"):
        rebuilt, rebuilt_table = run(tmp_path, "rebuilt", cache)
    corrupt = [r.getMessage() for r in caplog.records if "corrupt entry" in r.getMessage()]
    assert len(corrupt) == 2
    assert any(str(faiss_file.parent) in m for m in corrupt)
    assert any(str(matrix.parent.parent) in m for m in corrupt)
    assert (rebuilt["cache/indexes/hits"], rebuilt["cache/indexes/misses"]) == (0, 2)
    assert scores(rebuilt) == scores(cold)
    pd.testing.assert_frame_equal(rebuilt_table, cold_table)
    forget_runs(cache)
    again, _ = run(tmp_path, "again", cache)  # the rebuilt entries were stored and now load
    assert (again["cache/indexes/hits"], again["cache/indexes/misses"]) == (2, 0)


def test_index_of_other_chunks_is_not_trusted(tmp_path, caplog):
    """An entry whose ids.json does not list exactly the corpus' chunks is rebuilt."""
    cache = tmp_path / "cache"
    cold, _ = run(tmp_path, "cold", cache, "retrievers=[dense]")
    forget_runs(cache)
    (ids,) = cache.glob("indexes/*/*/ids.json")
    ids.write_text(json.dumps(json.loads(ids.read_text())[:-1]))
    with caplog.at_level(logging.WARNING, logger="rag_lab.cache.store"):
        warm, _ = run(tmp_path, "warm", cache, "retrievers=[dense]")
    assert any("corrupt entry" in r.getMessage() for r in caplog.records)
    assert scores(warm) == scores(cold)


# -- killed writers' temporaries -----------------------------------------------------------------


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temporaries_are_cleaned_on_open_and_not_counted(tmp_path):
    """Before: ``cache list`` counted every file of an index folder as an entry and the files in
    an orphan temp folder too, hid the temporaries' bytes, and nothing ever removed them."""
    cache = tmp_path / "cache"
    run(tmp_path, "cold", cache)
    before = inventory(cache)
    assert before["indexes"]["entries"] == 2  # one per retriever, not one per file
    shard = next((cache / "indexes").iterdir())
    host = store_mod.HOST
    dead = shard / f".{'a' * 40}.{host}-{dead_pid()}.q1w2e3.tmp"  # a killed put_dir
    dead.mkdir()
    (dead / "ids.json").write_text("[]")
    (dead / "index.faiss").write_bytes(b"x" * 4096)
    live = shard / f".b.json.gz.{host}-{os.getpid()}.zz9.tmp"  # a writer still at work
    live.write_bytes(b"y" * 100)
    old = shard / ".c.json.gz.abc123.tmp"  # the old name format, no pid: judged by age
    old.write_bytes(b"z" * 100)
    os.utime(old, (0, 0))
    fresh_unknown = shard / ".d.json.gz.def456.tmp"  # no pid, recent: may be a live writer
    fresh_unknown.write_bytes(b"w")

    listed = rag_lab("cache", "list", "--dir", str(cache), timeout=60)
    assert listed.returncode == 0, listed.stderr
    rows = {ln.split()[0]: ln.split()[1] for ln in listed.stdout.splitlines()[1:] if ln.strip()}
    assert rows["indexes"] == "2"
    assert "4 temporary file(s) or folder(s)" in listed.stdout
    assert inventory(cache)["indexes"]["bytes"] == before["indexes"]["bytes"]

    store_mod._OPEN.clear()  # a new process opening the cache
    open_cache(cache)
    assert not dead.exists() and not old.exists()
    assert live.exists() and fresh_unknown.exists()
    assert inventory(cache)["indexes"]["temporary"] == 2


# -- determinism: same config, same results; cached = recomputed ---------------------------------


def test_same_config_twice_gives_identical_metrics_and_rankings(tmp_path):
    first, first_table = run(tmp_path, "one", None)
    second, second_table = run(tmp_path, "two", None)
    assert scores(first) == scores(second) and scores(first)["ndcg_at_10"] > 0
    pd.testing.assert_frame_equal(first_table, second_table)


def test_cached_results_equal_recomputed_ones(tmp_path):
    plain, plain_table = run(tmp_path, "plain", None)
    cache = tmp_path / "cache"
    cold, cold_table = run(tmp_path, "cold", cache)
    warm, warm_table = run(tmp_path, "warm", cache)
    assert warm["cache/runs/hits"] == 2 and warm["cache_misses"] == 0
    assert scores(plain) == scores(cold) == scores(warm)
    pd.testing.assert_frame_equal(plain_table, cold_table)
    pd.testing.assert_frame_equal(plain_table, warm_table)
