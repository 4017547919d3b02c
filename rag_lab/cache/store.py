"""Content-addressed on-disk cache of stage outputs: parsed documents, chunks, per-chunk
embeddings, retriever indexes, per-retriever runs, cross-encoder pair scores, and the answer
stage's model calls (generated answers, judge verdicts). Keys come from ``rag_lab.cache.keys``.

Entries are files (JSON, arrays, folders) or rows of per-model SQLite tables (embeddings, pair
scores: one row per chunk text or pair, so an edit recomputes only what it touched). Counters
count entries, and rows for tables.

Writes go to a temporary file in the entry's folder and are renamed into place, so a killed run
leaves no partial entry and parallel jobs (Hydra's joblib launcher) can share the folder; two jobs
that compute the same entry write identical bytes, and the last rename wins.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import shutil
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

# every namespace the cache holds; `rag-lab cache list|clear` and the counters read this
NAMESPACES = (
    "documents",
    "chunks",
    "embeddings",
    "indexes",
    "runs",
    "rerank_scores",
    "generations",
    "judge",
)


class StageCache:
    """Entries live at ``root/<namespace>/<key[:2]>/<key>.<ext>``; counters say what this process
    read and wrote (``stats()``), for the run's metrics."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.hits: Counter[str] = Counter()
        self.misses: Counter[str] = Counter()
        self.bytes_read: Counter[str] = Counter()
        self.bytes_written: Counter[str] = Counter()
        self._tables: dict[tuple[str, str], sqlite3.Connection] = {}

    def path(self, namespace: str, key: str, ext: str) -> Path:
        return self.root / namespace / key[:2] / f"{key}.{ext}"

    def _write(self, path: Path, writer: Callable[[Any], None]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                writer(fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _count(self, namespace: str, path: Path | None, write: bool = False) -> None:
        if path is None:
            self.misses[namespace] += 1
            return
        size = path.stat().st_size
        if write:
            self.bytes_written[namespace] += size
        else:
            self.hits[namespace] += 1
            self.bytes_read[namespace] += size

    # -- JSON (documents, chunks, runs): gzip-compressed ------------------------------------
    def get_json(self, namespace: str, key: str) -> Any | None:
        p = self.path(namespace, key, "json.gz")
        try:
            with gzip.open(p, "rb") as fh:
                value = json.loads(fh.read())
        except (FileNotFoundError, OSError, EOFError, ValueError):
            self._count(namespace, None)
            return None
        self._count(namespace, p)
        return value

    def put_json(self, namespace: str, key: str, value: Any) -> None:
        p = self.path(namespace, key, "json.gz")
        data = json.dumps(value, ensure_ascii=False).encode()
        self._write(p, lambda fh: fh.write(gzip.compress(data, compresslevel=3, mtime=0)))
        self._count(namespace, p, write=True)

    # -- arrays (embeddings) -----------------------------------------------------------------
    def get_array(self, namespace: str, key: str) -> np.ndarray | None:
        p = self.path(namespace, key, "npy")
        try:
            arr = np.load(p, allow_pickle=False)
        except (FileNotFoundError, OSError, ValueError, EOFError):
            self._count(namespace, None)
            return None
        self._count(namespace, p)
        return arr

    def put_array(self, namespace: str, key: str, arr: np.ndarray) -> None:
        p = self.path(namespace, key, "npy")
        self._write(p, lambda fh: np.save(fh, np.ascontiguousarray(arr), allow_pickle=False))
        self._count(namespace, p, write=True)

    # -- folders (retriever indexes in their own formats) ----------------------------------
    def get_dir(self, namespace: str, key: str) -> Path | None:
        """The entry's folder if it is complete (it only appears, by rename, once fully written)."""
        p = self.root / namespace / key[:2] / key
        if not p.is_dir():
            self._count(namespace, None)
            return None
        self.hits[namespace] += 1
        self.bytes_read[namespace] += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
        return p

    def put_dir(self, namespace: str, key: str, writer: Callable[[Path], None]) -> Path:
        """Let ``writer`` fill a temporary folder, then rename it into place (a concurrent job that
        got there first wins; both wrote the same content)."""
        final = self.root / namespace / key[:2] / key
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{key}."))
        try:
            writer(tmp)
            try:
                os.replace(tmp, final)
            except OSError:  # already there (non-empty target): keep the existing entry
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.bytes_written[namespace] += sum(
            f.stat().st_size for f in final.rglob("*") if f.is_file()
        )
        return final

    # -- tables (per-item values: embeddings, pair scores) ---------------------------------
    def _table(self, namespace: str, table: str) -> sqlite3.Connection:
        if (namespace, table) not in self._tables:
            path = self.root / namespace / f"{table}.sqlite"
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(
                str(path), timeout=60
            )  # parallel jobs wait for each other's writes
            db.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v BLOB NOT NULL)")
            db.commit()
            self._tables[(namespace, table)] = db
        return self._tables[(namespace, table)]

    def get_many(self, namespace: str, table: str, keys: Sequence[str]) -> dict[str, bytes]:
        """The rows of ``keys`` that ``table`` holds; each key found counts a hit, each absent a
        miss."""
        db = self._table(namespace, table)
        out: dict[str, bytes] = {}
        unique = list(dict.fromkeys(keys))
        for i in range(0, len(unique), 500):
            part = unique[i : i + 500]
            rows = db.execute(f"SELECT k, v FROM kv WHERE k IN ({','.join('?' * len(part))})", part)
            out.update(rows.fetchall())
        self.hits[namespace] += len(out)
        self.misses[namespace] += len(unique) - len(out)
        self.bytes_read[namespace] += sum(len(v) for v in out.values())
        return out

    def put_many(self, namespace: str, table: str, items: Mapping[str, bytes]) -> None:
        """Store rows in one transaction (a killed run keeps every batch committed before it)."""
        db = self._table(namespace, table)
        with db:
            db.executemany("INSERT OR REPLACE INTO kv VALUES (?, ?)", list(items.items()))
        self.bytes_written[namespace] += sum(len(v) for v in items.values())

    def view(self, namespace: str) -> CacheView:
        return CacheView(self, namespace)

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = {
            "cache_hits": float(sum(self.hits.values())),
            "cache_misses": float(sum(self.misses.values())),
            "cache_bytes_read": float(sum(self.bytes_read.values())),
            "cache_bytes_written": float(sum(self.bytes_written.values())),
        }
        for ns in NAMESPACES:
            out[f"cache/{ns}/hits"] = float(self.hits[ns])
            out[f"cache/{ns}/misses"] = float(self.misses[ns])
        return out


class CacheView:
    """One namespace of a ``StageCache``: what the pipeline hands a stage (``CacheAware``), so a
    stage stores and reads its own entries without opening a cache or naming a namespace."""

    def __init__(self, cache: StageCache, namespace: str) -> None:
        if namespace not in NAMESPACES:
            raise ValueError(
                f"unknown cache namespace {namespace!r} (known: {', '.join(NAMESPACES)})"
            )
        self.cache, self.namespace = cache, namespace

    def get_json(self, key: str) -> Any | None:
        return self.cache.get_json(self.namespace, key)

    def put_json(self, key: str, value: Any) -> None:
        self.cache.put_json(self.namespace, key, value)

    def get_dir(self, key: str) -> Path | None:
        return self.cache.get_dir(self.namespace, key)

    def put_dir(self, key: str, writer: Callable[[Path], None]) -> Path:
        return self.cache.put_dir(self.namespace, key, writer)

    def get_many(self, table: str, keys: Sequence[str]) -> dict[str, bytes]:
        return self.cache.get_many(self.namespace, table, keys)

    def put_many(self, table: str, items: Mapping[str, bytes]) -> None:
        self.cache.put_many(self.namespace, table, items)

    def get_floats(self, table: str, keys: Sequence[str]) -> dict[str, float]:
        """Rows stored by ``put_floats`` (one float64 each)."""
        return {
            k: float(np.frombuffer(v, dtype=np.float64)[0])
            for k, v in self.get_many(table, keys).items()
        }

    def put_floats(self, table: str, items: Mapping[str, float]) -> None:
        self.put_many(table, {k: np.float64(v).tobytes() for k, v in items.items()})

    def get_vectors(self, table: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Rows stored by ``put_vectors`` (float32 vectors)."""
        return {
            k: np.frombuffer(v, dtype=np.float32) for k, v in self.get_many(table, keys).items()
        }

    def put_vectors(self, table: str, items: Mapping[str, np.ndarray]) -> None:
        self.put_many(
            table,
            {k: np.ascontiguousarray(v, dtype=np.float32).tobytes() for k, v in items.items()},
        )


_OPEN: dict[Path, StageCache] = {}


def open_cache(root: str | os.PathLike) -> StageCache:
    """The process-wide cache object for ``root``, so every stage's reads and writes add up in one
    set of counters (callers diff ``stats()`` before and after a run)."""
    key = Path(root).resolve()
    if key not in _OPEN:
        _OPEN[key] = StageCache(key)
    return _OPEN[key]


def diff_stats(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def inventory(root: str | os.PathLike) -> dict[str, dict[str, int]]:
    """``{namespace: {"entries": n, "bytes": b}}`` of a cache folder (temporary files excluded)."""
    out: dict[str, dict[str, int]] = {}
    base = Path(root)
    if not base.is_dir():
        return out
    for ns_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        files = [p for p in ns_dir.rglob("*") if p.is_file() and not p.name.startswith(".")]
        out[ns_dir.name] = {"entries": len(files), "bytes": sum(p.stat().st_size for p in files)}
    return out


def clear(root: str | os.PathLike, namespaces: Iterable[str] | None = None) -> int:
    """Delete the given namespaces (all when ``None``); returns bytes freed."""
    base = Path(root)
    inv = inventory(base)
    chosen = list(inv) if namespaces is None else [n for n in namespaces if n in inv]
    freed = 0
    for ns in chosen:
        freed += inv[ns]["bytes"]
        shutil.rmtree(base / ns)
    return freed
