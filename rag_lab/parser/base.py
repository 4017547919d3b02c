"""Parser protocol: a corpus source file → documents under the metadata contract;
``LineLocated``: the optional capability of saying which line each document comes from;
``parse_file``: one file parsed completely. The corpus-level loop (every file, duplicate ids,
empty documents, refused files) is ``rag_lab.pipeline.corpus.read_corpus``."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from rag_lab.types import Document

log = logging.getLogger(__name__)

# what the corpus read does with a document whose text is empty or blank (``dataset.on_empty``)
ON_EMPTY = ("skip", "fail")
# what it does with a file its parser refuses (``parser.on_error``): stop, or skip and count it
ON_ERROR = ("fail", "skip")


@runtime_checkable
class Parser(Protocol):
    """Reads one file and yields its documents.

    Contract: ``suffixes`` lists the file endings it reads (``.jsonl``); ``parse(path, root)``
    yields documents with stable ids (from the record, front matter, or the path relative to
    ``root`` without its suffix) and ``metadata['source']`` set to that relative path. A document
    may have empty text (the corpus read applies the dataset's ``on_empty`` policy). Bad input
    raises ``DataError`` naming the file (and line), never another exception.
    """

    suffixes: tuple[str, ...]

    def parse(self, path: Path, root: Path) -> Iterator[Document]: ...


@runtime_checkable
class LineLocated(Protocol):
    """A parser of line-oriented files (JSONL): ``parse_lines`` yields ``(line, document)``,
    ``line`` 1-based or ``None`` when unknown, so corpus-level errors can name ``file:line``."""

    def parse_lines(self, path: Path, root: Path) -> Iterator[tuple[int | None, Document]]: ...


@runtime_checkable
class Plain(Protocol):
    """A parser of records (JSON lines, CSV rows) that reads a file about as fast as its parsed
    entry would read back: the corpus read parses such files each time instead of caching each
    one (an edit of one record would rewrite the whole file's entry). ``plain`` is ``True``."""

    plain: bool


@runtime_checkable
class RecordLines(Protocol):
    """A parser of files that hold one record per line (JSON lines): ``parse_record`` reads
    line ``lineno`` (its text ``line``) alone, exactly as reading the whole file reads it, and
    returns its document (``None`` for a blank line). An edit of a few records re-parses those
    records only (``rag_lab.pipeline.corpus``)."""

    def parse_record(self, path: Path, root: Path, lineno: int, line: str) -> Document | None: ...


@runtime_checkable
class Selective(Protocol):
    """A parser that, as configured, reads only some files of its suffixes: ``unread(path)`` is
    why it leaves ``path`` out (``None``: it reads it). The corpus read counts such files with
    the others it does not read (an auto parser's SQLite entry without a query: the file is
    left out and counted, not refused)."""

    def unread(self, path: Path) -> str | None: ...


def relative_id(path: Path, root: Path) -> str:
    try:
        rel = path.relative_to(root)
    except ValueError:
        rel = Path(path.name)
    return rel.with_suffix("").as_posix()


def _located(parser: Parser, path: Path, root: Path) -> Iterator[tuple[str, Document]]:
    """``(where, document)``: ``where`` is ``file:line`` when the parser knows the line."""
    if isinstance(parser, LineLocated):
        for line, doc in parser.parse_lines(path, root):
            yield (f"{path}:{line}" if line else str(path)), doc
    else:
        for doc in parser.parse(path, root):
            yield str(path), doc


@dataclass(frozen=True)
class ParsedFile:
    """One source file parsed: ``(where, document)`` pairs (``where`` is ``file:line`` when the
    parser knows lines) and the seconds it took. What the stage cache keeps per file, so an
    edited file is the only one parsed (or OCR'd) again."""

    source: str
    documents: tuple[tuple[str, Document], ...]
    seconds: float


def parse_file(parser: Parser, path: Path, root: Path) -> ParsedFile:
    """Parse one file completely (a ``DataError`` names the file and, where known, line/page)."""
    t0 = time.perf_counter()
    located = tuple(_located(parser, path, root))
    return ParsedFile(str(path), located, time.perf_counter() - t0)


@dataclass(frozen=True)
class ParsedCorpus:
    """What the corpus read (``rag_lab.pipeline.corpus.read_corpus``) produced: the documents
    kept, how many had empty text (``n_empty_documents``; skipped under ``on_empty=skip``), the
    warnings to report, each file parsed (``files``: for the ingest report), the files refused
    under ``on_error=skip`` (``skipped_files``: ``(file, one-line error)``), the files no parser
    read (``unread_files``: another suffix, a hidden file, a SQLite file without a query) and
    the symbolic links left out (``skipped_links``: out of the corpus folder, dangling, to a
    folder), each ``(file, reason)``."""

    documents: tuple[Document, ...]
    n_empty: int = 0
    warnings: tuple[str, ...] = ()
    files: tuple[ParsedFile, ...] = ()
    skipped_files: tuple[tuple[str, str], ...] = ()
    unread_files: tuple[tuple[str, str], ...] = ()
    skipped_links: tuple[tuple[str, str], ...] = ()
