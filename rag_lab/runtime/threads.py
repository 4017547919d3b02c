"""How many threads a process's numeric libraries use when it shares the machine with sibling
worker processes (``hydra/launcher=fork``: ``rag_lab.sweep.launcher``).

Each worker uses ``CPUs // running`` threads, where ``running`` counts the workers that are
neither finished nor waiting for another's stage-cache claim: two workers that encode at once get
half the cores each (no oversubscription), and a worker that encodes while the other waits for
that very index gets all of them. The count is re-read (:func:`rebalance`) when a job starts,
when a claim is acquired and before each block a dense retriever encodes or a cross-encoder
scores. Outside a worker every function here is a no-op.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)

_shared: tuple[Any, Any, int] | None = None  # (running workers, its lock, CPUs) in a worker
_current = 0  # the thread count last set here


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def omp_threads() -> int | None:
    """``OMP_NUM_THREADS`` as a positive count (in a worker, its share of the cores:
    :func:`limit`); ``None`` when unset or not a positive integer."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    return int(env) if env.isdigit() and int(env) > 0 else None


def limit(threads: int) -> None:
    """At most ``threads`` threads for OpenMP / BLAS pools, torch and faiss in this process
    (environment variables for libraries loaded later, threadpoolctl for those loaded)."""
    global _current
    _current = threads
    for name in THREAD_ENV:
        os.environ[name] = str(threads)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads)
    except ImportError:  # pragma: no cover - a dependency of scikit-learn
        pass
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    if "faiss" in sys.modules:
        sys.modules["faiss"].omp_set_num_threads(threads)


def share(running: Any, lock: Any, cpus: int) -> None:
    """Make this (forked) process one of the workers counted by ``running`` (a shared int that
    starts at the number of workers) and set its threads."""
    global _shared
    _shared = (running, lock, cpus)
    rebalance()


def rebalance() -> None:
    """Set this worker's threads to ``CPUs // running`` when that changed."""
    if _shared is None:
        return
    running, _, cpus = _shared
    threads = max(1, cpus // max(1, running.value))
    if threads != _current:
        limit(threads)


def _count(delta: int) -> None:
    if _shared is not None:
        running, lock, _ = _shared
        with lock:
            running.value += delta


def in_worker() -> bool:
    """Whether this process is one of several sharing the machine (:func:`share` was called)."""
    return _shared is not None


@contextlib.contextmanager
def busy() -> Iterator[None]:
    """A task of a worker pool whose idle workers do not count (``share`` with ``running``
    starting at 0, e.g. ``rag-lab walk``'s): this worker counts while the task runs."""
    _count(1)
    rebalance()
    try:
        yield
    finally:
        _count(-1)


def leave() -> None:
    """This worker is done: the others may use its cores."""
    _count(-1)


@contextlib.contextmanager
def waiting() -> Iterator[None]:
    """This worker waits (for another's claim): its cores count for the others meanwhile."""
    _count(-1)
    try:
        yield
    finally:
        _count(1)
        rebalance()
