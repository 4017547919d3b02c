"""Reading input files with errors that name the file and line."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rag_lab.errors import DataError


def require_file(path: Path, what: str) -> Path:
    if not path.exists():
        raise DataError(f"{what} not found: {path}")
    if not path.is_file():
        raise DataError(f"{what} is not a file: {path}")
    return path


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, record)`` for each non-blank line; a malformed line raises
    ``DataError`` naming ``file:line``."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(
                    f"{path}:{lineno}: malformed JSON ({exc.msg} at column {exc.colno})"
                ) from None
            if not isinstance(rec, dict):
                raise DataError(
                    f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}"
                )
            yield lineno, rec


def require_key(rec: dict[str, Any], key: str, path: Path, lineno: int) -> Any:
    if key not in rec or rec[key] is None:
        raise DataError(f"{path}:{lineno}: missing required key {key!r}")
    return rec[key]


def fingerprint_files(
    paths: Iterable[Path], digest_size: int = 16, root: Path | None = None
) -> str:
    """Content hash over files (order fixed by the caller). Bytes count; with ``root``, so do the
    paths relative to it (ids derived from file names change when a file is renamed)."""
    h = hashlib.blake2b(digest_size=digest_size)
    for p in paths:
        if root is not None:
            h.update(Path(p).relative_to(root).as_posix().encode() + b"\0")
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0file\0")
    return h.hexdigest()
