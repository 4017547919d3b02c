"""``StageCache.claim``: parallel jobs that miss one entry compute it once."""

from __future__ import annotations

import os
import signal
import time

from rag_lab.cache.store import StageCache


def _child(work) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's own exit
        try:
            work()
        finally:
            os._exit(0)
    return pid


def test_a_second_process_waits_for_the_claim_and_reads_what_the_first_wrote(tmp_path):
    ready = tmp_path / "claimed"

    def compute() -> None:
        cache = StageCache(tmp_path)
        assert cache.get_json("chunks", "k1") is None
        with cache.claim("chunks", "k1"):
            ready.touch()
            time.sleep(0.6)  # computing
            cache.put_json("chunks", "k1", {"n": 1})

    pid = _child(compute)
    while not ready.exists():
        time.sleep(0.01)
    cache = StageCache(tmp_path)
    t0 = time.perf_counter()
    assert cache.get_json("chunks", "k1") is None  # not written yet: a miss
    with cache.claim("chunks", "k1"):  # waits for the other process
        waited = time.perf_counter() - t0
        assert cache.get_json("chunks", "k1") == {"n": 1}
    os.waitpid(pid, 0)
    assert waited > 0.3
    # the read inside the claim counts in place of the miss before it: one lookup, one hit
    assert (cache.hits["chunks"], cache.misses["chunks"]) == (1, 0)


def test_a_killed_holder_releases_its_claim(tmp_path):
    ready = tmp_path / "claimed"

    def die_holding() -> None:
        with StageCache(tmp_path).claim("indexes", "k2"):
            ready.touch()
            os.kill(os.getpid(), signal.SIGKILL)

    pid = _child(die_holding)
    _, status = os.waitpid(pid, 0)
    assert ready.exists() and os.WIFSIGNALED(status)
    cache = StageCache(tmp_path)
    assert cache.get_dir("indexes", "k2") is None
    t0 = time.perf_counter()
    with cache.claim("indexes", "k2"):
        assert time.perf_counter() - t0 < 0.5
        assert cache.get_dir("indexes", "k2") is None  # nothing was written: compute it here
    assert cache.misses["indexes"] == 1


def test_a_claim_is_reentrant_in_one_process_and_other_keys_do_not_wait(tmp_path):
    cache = StageCache(tmp_path)
    for key in ("a", "b"):
        assert cache.get_json("runs", key) is None
    t0 = time.perf_counter()
    with cache.claim("runs", "a"):
        with cache.claim("runs", "a"):  # the same entry again: no self-deadlock
            assert cache.get_json("runs", "a") is None
        with cache.claim("runs", "b"):
            assert cache.get_json("runs", "b") is None
    assert time.perf_counter() - t0 < 0.5
    assert sorted(p.name for p in (tmp_path / ".claims" / "runs").iterdir()) == ["a", "b"]
