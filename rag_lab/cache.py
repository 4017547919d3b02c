"""Content-addressed on-disk cache of stage outputs: parsed documents, chunks, document
embeddings, per-retriever runs, and the answer stage's model calls (generated answers, judge
verdicts).

A stage's key hashes what defines its output: its resolved config subtree, the key of its input
(or the corpus fingerprint), and the identity of any model it runs (name or path plus a hash of
the weights). Change one of those and exactly that stage and the ones downstream miss; anything
else (fusion, reranker depth, metrics) replays cached entries.

Writes go to a temporary file in the entry's folder and are renamed into place, so a killed run
leaves no partial entry and parallel jobs (Hydra's joblib launcher) can share the folder; two jobs
that compute the same entry write identical bytes, and the last rename wins.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

NAMESPACES = ("documents", "chunks", "embeddings", "indexes", "runs", "generations", "judge")


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":")).encode()


def stage_key(stage: str, config: Any, *inputs: str) -> str:
    """Key of a stage: its name, its resolved config and the keys/fingerprints of its inputs."""
    return hashlib.blake2b(_canonical({"stage": stage, "config": config, "inputs": list(inputs)}),
                           digest_size=20).hexdigest()


def content_key(identity: Any, texts: Iterable[str]) -> str:
    """Key of an encoding: the encoder's identity and the exact texts, in order."""
    h = hashlib.blake2b(digest_size=20)
    h.update(_canonical(identity))
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


class StageCache:
    """Entries live at ``root/<namespace>/<key[:2]>/<key>.<ext>``; counters say what this process
    read and wrote (``stats()``), for the run's metrics."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.hits: Counter[str] = Counter()
        self.misses: Counter[str] = Counter()
        self.bytes_read: Counter[str] = Counter()
        self.bytes_written: Counter[str] = Counter()

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
        self.bytes_written[namespace] += sum(f.stat().st_size for f in final.rglob("*") if f.is_file())
        return final

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = {
            "cache_hits": float(sum(self.hits.values())), "cache_misses": float(sum(self.misses.values())),
            "cache_bytes_read": float(sum(self.bytes_read.values())),
            "cache_bytes_written": float(sum(self.bytes_written.values())),
        }
        for ns in NAMESPACES:
            out[f"cache/{ns}/hits"] = float(self.hits[ns])
            out[f"cache/{ns}/misses"] = float(self.misses[ns])
        return out


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
