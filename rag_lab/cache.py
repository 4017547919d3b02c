"""Content-addressed on-disk cache for expensive stage outputs (document embeddings first).

A key hashes everything that defines the output (the producer's identity: model, weights hash,
prompts, normalisation; and the exact input texts), so a changed document, model or setting
misses, and an unchanged one hits whatever config it came from. Writes go to a temporary file in
the same folder and are renamed into place, so a killed run never leaves a partial entry and
parallel jobs can share the folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


def content_key(identity: Any, texts: Iterable[str]) -> str:
    h = hashlib.blake2b(digest_size=20)
    h.update(json.dumps(identity, sort_keys=True, default=str).encode())
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


class ArrayCache:
    """``get(key)`` / ``put(key, array)`` of numpy arrays under ``root/<namespace>/<key>.npy``."""

    def __init__(self, root: str | os.PathLike, namespace: str = "embeddings") -> None:
        self.dir = Path(root) / namespace
        self.hits = 0
        self.misses = 0

    def path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.npy"

    def get(self, key: str) -> np.ndarray | None:
        p = self.path(key)
        try:
            arr = np.load(p, allow_pickle=False)
        except (FileNotFoundError, ValueError, OSError):
            self.misses += 1
            return None
        self.hits += 1
        return arr

    def put(self, key: str, arr: np.ndarray) -> Path:
        p = self.path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, arr, allow_pickle=False)
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return p
