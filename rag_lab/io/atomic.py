"""Run outputs written atomically: a reader (``rag-lab gate``, ``rag-lab export``, a rerun) sees
the old file or the whole new one, never a truncated one.

:func:`atomic_open` writes into a temporary file in the target's folder (same file system, so the
rename is atomic), flushes and fsyncs it, then ``os.replace``-s it onto the target; on any error
the temporary is removed and the target is left as it was. A full disk, an exhausted quota or a
read-only file system (``ENOSPC``, ``EDQUOT``, ``EROFS``) becomes a :class:`~rag_lab.errors.
DiskError` naming the target (a failed ``write()`` names no file of its own), which every
command reports in one line with exit status 2 (:func:`rag_lab.errors.user_errors`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from rag_lab.errors import DiskError, is_disk_error

TEMP_SUFFIX = ".partial"  # a killed writer's leftover: ".<name>.<random>.partial" beside the target


@contextmanager
def atomic_open(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """``open(path, mode)`` (``"w"``: UTF-8 text, ``"wb"``: bytes) that appears only when the
    block finishes: temporary file, flush, fsync, rename. The folder is created if missing."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode {mode!r} (only 'w' or 'wb')")
    path = Path(path)
    tmp = ""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
        encoding = "utf-8" if mode == "w" else None
        with os.fdopen(fd, mode, encoding=encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; an output reads like any file
        os.replace(tmp, path)
        tmp = ""
    except OSError as exc:
        if is_disk_error(exc):
            raise DiskError.of(exc, path) from None
        raise
    finally:
        if tmp:
            Path(tmp).unlink(missing_ok=True)


def write_atomic(path: Path, data: str | bytes) -> Path:
    """``path`` holding ``data`` (text as UTF-8), written with :func:`atomic_open`."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)
    return Path(path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
