"""Reading input files with errors that name the file and line.

Text files are UTF-8; a leading byte-order mark is accepted (``utf-8-sig``: Excel and Notepad
write one). Anything else is refused with the first line that does not decode, the encoding it
likely is (charset-normalizer's guess) and the command that converts it, so a GBK or Big5 export
says so instead of failing deep inside a parser.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.errors import ConfigError, DataError

if TYPE_CHECKING:
    from charset_normalizer.models import CharsetMatch

ENCODING = "utf-8-sig"  # UTF-8, with or without a BOM
# a JSON escape of a UTF-16 surrogate: paired ones are fine, a lone one cannot be written as UTF-8
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def require_file(path: Path, what: str) -> Path:
    if not path.exists():
        raise DataError(f"{what} not found: {path}")
    if not path.is_file():
        raise DataError(f"{what} is not a file: {path}")
    return path


# bytes of a file the encoding guess looks at (cut at a line end): enough for a reliable guess
_GUESS_BYTES = 1 << 20
# the encodings guessed among, in the order that breaks ties (a few lines of Chinese fit GBK,
# Big5 and Korean cp949 alike, and "café" fits cp1251 and cp1252): rag_lab's corpora are
# Chinese and English first. Legacy Chinese, Japanese and Korean encodings, then the Western and
# Cyrillic Windows code pages, Latin-1, UTF-16 (with a byte-order mark)
_CANDIDATES = (
    "gb18030", "big5", "shift_jis", "euc_jp", "cp949", "cp1252", "cp1251", "latin_1", "utf_16"
)  # fmt: skip
# a file that decodes in the commoner name is named by it (GB18030 is a superset of GBK)
_COMMONER = {"gb18030": "gbk"}
# guesses whose "chaos" (charset-normalizer's mess score, 0-1) is within this of the best one's
# are equally good; the order above decides between them
_CHAOS_TIE = 0.1


def read_yaml_file(path: Path, what: str, syntax: str = "YAML") -> Any:
    """A YAML (or JSON) file a setting names (a dictionary, ...), parsed with ``safe_load``; a
    missing, unreadable or malformed file is one ``ConfigError`` naming it (and the line), with
    ``what`` it is and the ``syntax`` it should have."""
    import yaml

    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the {what} ({exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "?"
        raise ConfigError(
            f"{path}: {where}: not valid {syntax} ({getattr(exc, 'problem', exc)})"
        ) from None


def guess_encodings(raw: bytes, limit: int = 3) -> list[str]:
    """The likely encodings of ``raw`` (Python codec names: ``gbk``, ``big5``, ``shift_jis``,
    ``cp1252``, ...), likeliest first, at most ``limit``: charset-normalizer's readings of its
    first MiB among ``_CANDIDATES``, the least messy first, ties broken by coherence (a
    language's letter frequencies) and then by the order of ``_CANDIDATES``. Only encodings
    that decode ``raw`` and are about as good as the best. A guess, not a proof."""
    from charset_normalizer import from_bytes

    if len(raw) > _GUESS_BYTES:
        raw = raw[: raw.rfind(b"\n", 0, _GUESS_BYTES) + 1 or _GUESS_BYTES]
    matches = list(from_bytes(raw, cp_isolation=list(_CANDIDATES)))
    if not matches:
        return []
    best = min(m.chaos for m in matches)

    def rank(m: CharsetMatch) -> tuple[float, int]:
        name = str(m.encoding)
        order = _CANDIDATES.index(name) if name in _CANDIDATES else len(_CANDIDATES)
        return -round(float(m.coherence), 1), order

    out: list[str] = []
    for match in sorted((m for m in matches if m.chaos <= best + _CHAOS_TIE), key=rank):
        name = str(match.encoding)
        common = _COMMONER.get(name)
        for candidate in (common, name) if common else (name,):
            try:
                raw.decode(candidate)
            except (UnicodeDecodeError, LookupError):
                continue
            if candidate not in out:
                out.append(candidate)
            break
    return out[:limit]


def iconv_name(codec: str) -> str:
    """A Python codec name as iconv spells it: ``shift_jis`` → ``shift-jis``, ``iso8859_14`` →
    ``iso8859-14``, ``mac_roman`` → ``macintosh``."""
    return {"mac_roman": "macintosh"}.get(codec, codec.replace("_", "-"))


def not_utf8(path: Path) -> DataError:
    """The error for a file that is not UTF-8: the first bad line, the likely encoding
    (``guess_encodings`` over the file's bytes: Big5, GBK, Shift-JIS, Windows-1252, ...; the
    other candidates in brackets) and the command that converts the file."""
    lineno, byte = 0, 0
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):  # noqa: B007  (lineno is used after the loop)
            try:
                raw.decode(ENCODING if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                byte = raw[exc.start]
                break
        fh.seek(0)
        guesses = [iconv_name(g) for g in guess_encodings(fh.read(_GUESS_BYTES + 1))]
    likely = ""
    if guesses:
        others = f" (or {', '.join(guesses[1:])})" if guesses[1:] else ""
        likely = f", likely {guesses[0]}{others}"
    name = guesses[0] if guesses else "<its encoding>"
    return DataError(
        f"{path}:{lineno}: not UTF-8 text (byte 0x{byte:02x}){likely}; convert it, e.g. "
        f"iconv -f {name} -t utf-8 {path.name} > {path.stem}.utf8{path.suffix}"
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
        rec = jsonl_record(path, lineno, line)
        if rec is not None:
            yield lineno, rec


def jsonl_record(path: Path, lineno: int, line: str) -> dict[str, Any] | None:
    """Line ``lineno`` of a JSON-lines file as its record (``read_jsonl``'s reading of one
    line); ``None`` for a blank line; a malformed one raises ``DataError`` naming ``file:line``."""
    if not line.strip():
        return None
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
    return rec


def require_key(rec: dict[str, Any], key: str, path: Path, lineno: int) -> Any:
    if key not in rec or rec[key] is None:
        raise DataError(f"{path}:{lineno}: missing required key {key!r}")
    return rec[key]


@dataclass(frozen=True)
class CorpusFolder:
    """A corpus folder's listing (:func:`list_corpus_folder`): ``files`` to read, sorted, and
    ``left_out``: ``(path, reason)`` of every entry not read (links leading out of the folder,
    dangling links, linked folders, hidden files and folders, sockets and pipes), so the corpus
    read can count them."""

    files: tuple[Path, ...]
    left_out: tuple[tuple[Path, str], ...] = ()


def list_corpus_folder(folder: Path) -> CorpusFolder:
    """Every regular file under ``folder``, walked without following links to folders.

    Left out, with the reason: a symbolic link whose target is not inside ``folder`` (a link
    to ``/etc/passwd`` must not put the host's files into an index), a dangling link, a link to
    a folder (not followed: a link loop or a second copy of the corpus), a hidden file or folder
    (``.DS_Store``, ``.git/``: not descended into), anything that is not a regular file (a
    FIFO would block the read). A link to a file inside ``folder`` is read like the file."""
    base = folder.resolve()
    files: list[Path] = []
    left_out: list[tuple[Path, str]] = []
    for top, dirs, names in os.walk(folder):
        here = Path(top)
        for name in sorted(dirs):
            path = here / name
            if path.is_symlink():
                left_out.append((path, _link_reason(path, base) or "a link to a folder"))
                dirs.remove(name)
            elif name.startswith("."):
                left_out.append((path, "a hidden folder"))
                dirs.remove(name)
        for name in names:
            path = here / name
            why = _link_reason(path, base) if path.is_symlink() else None
            if why is None and name.startswith("."):
                why = "a hidden file"
            if why is None and not path.is_file():
                why = "not a regular file"
            if why is None:
                files.append(path)
            else:
                left_out.append((path, why))
    return CorpusFolder(tuple(sorted(files)), tuple(sorted(left_out)))


def _link_reason(path: Path, base: Path) -> str | None:
    """Why the symbolic link ``path`` is not read (``None``: it is, a file inside ``base``)."""
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):  # missing target, or a loop of links
        return f"a dangling link (to {os.readlink(path)})"
    if base != target and base not in target.parents:
        return f"a link to {target}, outside the corpus folder"
    if target.is_dir():
        return "a link to a folder"
    return None


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


def sha256_file(path: Path) -> str:
    """The sha256 of one file's bytes (hex), read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
