"""Input-file fingerprints reused while the files are provably unchanged.

``rag_lab.io.files.fingerprint_files`` reads every byte it hashes; a corpus is fingerprinted by
every job (it keys the parse, chunk and embed stages), even one whose every stage is then read back.
``fingerprint`` returns the same value, reading the files only when their ``stat`` differs from
the one recorded with a previous value: the key is each file's absolute path, size, mtime_ns,
ctime_ns, inode and device (ctime cannot be set back by a writer, so an edit that restores
mtime and size is still seen).

Never stale: a value is recorded only when no file changed while it was hashed and every file
was last modified more than ``SETTLE_S`` before (a write within the file system's timestamp
granularity of the hash could otherwise leave the same stat on different bytes, git's "racy"
case); such a file is simply hashed again next time. Records live in the process (a multirun's
jobs share them) and, once ``attach`` names a file (``open_cache`` attaches
``<cache.dir>/fingerprints.sqlite``), on disk for the next process. That file is an optimisation
only: it cannot be read or written, and nothing but speed is lost.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from rag_lab.io.files import fingerprint_files

log = logging.getLogger(__name__)

SETTLE_S = 2.0
FILE_NAME = "fingerprints.sqlite"


def _signature(path: Path) -> list:
    # abspath, not resolve (a syscall per component): stat follows a link, and a link pointed
    # elsewhere has the target's inode
    st = os.stat(path)
    return [os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


class _Records:
    """Recorded ``key -> fingerprint`` pairs: a dict, and a SQLite table once attached."""

    def __init__(self) -> None:
        self.memory: dict[str, str] = {}
        self.path: Path | None = None
        self._db: sqlite3.Connection | None = None

    def attach(self, path: Path | None) -> None:
        if path != self.path and self._db is not None:
            self._db.close()
            self._db = None
        self.path = path

    def _open(self) -> sqlite3.Connection | None:
        if self._db is None and self.path is not None:
            try:
                db = sqlite3.connect(str(self.path), timeout=10)
                db.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
                db.commit()
                self._db = db
            except (OSError, sqlite3.Error) as exc:
                log.debug("fingerprints: cannot open %s (%s)", self.path, exc)
                self.path = None
        return self._db

    def get(self, key: str) -> str | None:
        if key in self.memory:
            return self.memory[key]
        if self.path is None or not self.path.is_file():
            return None
        db = self._open()
        try:
            row = db.execute("SELECT v FROM kv WHERE k = ?", (key,)).fetchone() if db else None
        except sqlite3.Error:
            return None
        if row is not None:
            self.memory[key] = row[0]
        return row[0] if row else None

    def put(self, key: str, value: str) -> None:
        self.memory[key] = value
        db = self._open()
        if db is None:
            return
        try:
            with db:
                db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (key, value))
        except sqlite3.Error as exc:  # a read-only or full cache folder: memory only
            log.debug("fingerprints: cannot write %s (%s)", self.path, exc)


RECORDS = _Records()


def attach(path: str | os.PathLike | None) -> None:
    """Keep records in the SQLite file ``path`` too (``None``: in the process only)."""
    RECORDS.attach(Path(path) if path is not None else None)


def fingerprint(paths: Iterable[Path], digest_size: int = 16, root: Path | None = None) -> str:
    """``rag_lab.io.files.fingerprint_files(paths, digest_size, root)``, read back from a record
    when every file's stat is the one it was recorded with."""
    files = [Path(p) for p in paths]
    rel = [Path(p).relative_to(root).as_posix() for p in files] if root is not None else None
    before = [_signature(p) for p in files]
    payload = {"digest_size": digest_size, "relative": rel, "files": before}
    key = hashlib.blake2b(json.dumps(payload).encode(), digest_size=20).hexdigest()
    hit = RECORDS.get(key)
    if hit is not None:
        return hit
    value = fingerprint_files(files, digest_size=digest_size, root=root)
    settled = time.time_ns() - int(SETTLE_S * 1e9)
    unchanged = [_signature(p) for p in files] == before
    if unchanged and all(max(s[2], s[3]) < settled for s in before):
        RECORDS.put(key, value)
    return value
