"""One process at a time builds a derived file (a converted model, an ONNX export): the others
wait, then find it built. An ``flock`` on ``.<target>.lock`` beside the target; the OS drops it
when its holder dies, so a killed build blocks nobody. Without ``flock`` (Windows) or where the
lock file cannot be made (a read-only folder) it is a no-op: the builders then work in parallel
and their atomic renames decide, as before."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def exclusive(target: Path) -> Iterator[None]:
    """Hold the build lock of ``target`` (re-check whether it is built inside)."""
    if fcntl is None:
        yield
        return
    lock = target.with_name(f".{target.name}.lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
