"""Reading input files with errors that name the file and line.

Text files are UTF-8; a leading byte-order mark is accepted (``utf-8-sig``: Excel and Notepad
write one). Anything else is refused with the first line that does not decode and the command that
converts it, so a GBK export says so instead of failing deep inside a parser.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rag_lab.errors import DataError

ENCODING = "utf-8-sig"  # UTF-8, with or without a BOM
# a JSON escape of a UTF-16 surrogate: paired ones are fine, a lone one cannot be written as UTF-8
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def require_file(path: Path, what: str) -> Path:
    if not path.exists():
        raise DataError(f"{what} not found: {path}")
    if not path.is_file():
        raise DataError(f"{what} is not a file: {path}")
    return path


def not_utf8(path: Path) -> DataError:
    """The error for a file that is not UTF-8: the first bad line and how to convert the file
    (GBK, the usual culprit for Chinese exports, is named when that line decodes as GBK)."""
    lineno, byte, guess = 0, 0, "<its encoding>"
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):  # noqa: B007  (lineno is used after the loop)
            try:
                raw.decode(ENCODING if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                byte = raw[exc.start]
                try:
                    raw.decode("gbk")
                    guess = "gbk"
                except UnicodeDecodeError:
                    pass
                break
    return DataError(
        f"{path}:{lineno}: not UTF-8 text (byte 0x{byte:02x}); convert it, e.g. "
        f"iconv -f {guess} -t utf-8 {path.name} > {path.stem}.utf8{path.suffix}"
    )


def read_text(path: Path) -> str:
    """A whole text file (UTF-8, BOM stripped, newlines normalised to ``\\n``)."""
    try:
        return path.read_text(encoding=ENCODING)
    except UnicodeDecodeError:
        raise not_utf8(path) from None


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` of a UTF-8 text file (BOM stripped); a file that is not
    UTF-8 raises ``DataError`` naming the first line that does not decode."""
    try:
        with open(path, encoding=ENCODING) as fh:
            yield from enumerate(fh, 1)
    except UnicodeDecodeError:
        raise not_utf8(path) from None


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, record)`` for each non-blank line; a malformed line raises
    ``DataError`` naming ``file:line``."""
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{path}:{lineno}: malformed JSON ({exc.msg} at column {exc.colno})"
            ) from None
        except (ValueError, RecursionError) as exc:  # a 5000-digit number, [[[[... nesting
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise DataError(f"{path}:{lineno}: unreadable JSON ({reason})") from None
        if not isinstance(rec, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}")
        if _SURROGATE_ESCAPE.search(line):
            try:
                json.dumps(rec, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                raise DataError(
                    f"{path}:{lineno}: an unpaired UTF-16 surrogate escape (\\ud800-\\udfff) "
                    "is not text"
                ) from None
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
