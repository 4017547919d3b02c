"""Parser protocol: a corpus source file → documents under the metadata contract;
``LineLocated``: the optional capability of saying which line each document comes from;
``read_corpus`` / ``parse_corpus``: every source, with the corpus-level checks."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from rag_lab.errors import ConfigError, DataError
from rag_lab.runtime import progress
from rag_lab.types import Document

log = logging.getLogger(__name__)

# what parse_corpus does with a document whose text is empty or blank (``dataset.on_empty``)
ON_EMPTY = ("skip", "fail")
# what it does with a file its parser refuses (``parser.on_error``): stop, or skip and count it
ON_ERROR = ("fail", "skip")


@runtime_checkable
class Parser(Protocol):
    """Reads one file and yields its documents.

    Contract: ``suffixes`` lists the file endings it reads (``.jsonl``); ``parse(path, root)``
    yields documents with stable ids (from the record, front matter, or the path relative to
    ``root`` without its suffix) and ``metadata['source']`` set to that relative path. A document
    may have empty text (``parse_corpus`` applies the dataset's ``on_empty`` policy). Bad input
    raises ``DataError`` naming the file (and line), never another exception.
    """

    suffixes: tuple[str, ...]

    def parse(self, path: Path, root: Path) -> Iterator[Document]: ...


@runtime_checkable
class LineLocated(Protocol):
    """A parser of line-oriented files (JSONL): ``parse_lines`` yields ``(line, document)``,
    ``line`` 1-based or ``None`` when unknown, so corpus-level errors can name ``file:line``."""

    def parse_lines(self, path: Path, root: Path) -> Iterator[tuple[int | None, Document]]: ...


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
    """What ``read_corpus`` produced: the documents kept, how many had empty text
    (``n_empty_documents``; skipped under ``on_empty=skip``), the warnings to report, each file
    parsed (``files``: for the ingest report) and the files refused under ``on_error=skip``
    (``skipped_files``: ``(file, one-line error)``)."""

    documents: tuple[Document, ...]
    n_empty: int = 0
    warnings: tuple[str, ...] = ()
    files: tuple[ParsedFile, ...] = ()
    skipped_files: tuple[tuple[str, str], ...] = ()


def read_corpus(
    parser: Parser,
    sources: Iterable[Path],
    root: Path,
    on_empty: str = "skip",
    on_error: str = "fail",
    parse: Callable[[Path], ParsedFile] | None = None,
) -> ParsedCorpus:
    """Parse every source whose suffix the parser reads.

    Refused (``DataError``): a repeated document id (both places named, ``file:line`` where the
    parser knows lines); a corpus with no records (the empty file named); with
    ``on_empty="fail"``, a document with empty or blank text; a corpus whose documents are all
    empty. With ``on_empty="skip"`` (the default) empty documents are left out and counted.
    A file the parser refuses (``DataError``: corrupt, encrypted, not the format its suffix says)
    stops the read under ``on_error="fail"``; under ``skip`` it is left out whole, counted
    (``n_skipped_files``) and named in the warnings. ``ConfigError`` (a missing OCR engine) is
    never skipped. ``parse`` replaces ``parse_file`` (the pipeline's per-file cache).
    """
    if on_empty not in ON_EMPTY:
        raise ConfigError(f"dataset.on_empty={on_empty!r}: use one of {', '.join(ON_EMPTY)}")
    if on_error not in ON_ERROR:
        raise ConfigError(f"parser.on_error={on_error!r}: use one of {', '.join(ON_ERROR)}")
    parse_one = parse or (lambda p: parse_file(parser, p, root))
    docs: list[Document] = []
    origin: dict[str, str] = {}
    empty: list[tuple[str, str]] = []
    read: list[Path] = []
    skipped: list[Path] = []
    files: list[ParsedFile] = []
    refused: list[tuple[str, str]] = []
    shown = progress.bar(list(sources), desc="parse", unit="file")  # draws only for a slow read
    for path in shown:
        shown.set_postfix_str(path.name, refresh=False)
        if path.suffix.lower() not in parser.suffixes:
            skipped.append(path)
            continue
        read.append(path)
        try:
            parsed = parse_one(path)
        except DataError as exc:
            if on_error == "fail":
                raise
            refused.append((str(path), str(exc)))
            log.warning("skipped (parser.on_error=skip): %s", exc)
            continue
        files.append(parsed)
        for where, doc in parsed.documents:
            if doc.doc_id in origin:
                raise DataError(
                    f"{where}: duplicate document id {doc.doc_id!r} (first at {origin[doc.doc_id]})"
                )
            origin[doc.doc_id] = where
            if not doc.text.strip():
                if on_empty == "fail":
                    raise DataError(
                        f"{where}: document {doc.doc_id!r} has empty text "
                        "(dataset.on_empty=skip leaves such documents out)"
                    )
                empty.append((doc.doc_id, where))
                continue
            docs.append(doc)
    if not docs:
        if refused:
            raise DataError(
                f"empty corpus under {root}: every file was refused ({len(refused)} skipped "
                f"under parser.on_error=skip; first: {refused[0][1]})"
            )
        if empty:
            raise DataError(
                f"empty corpus under {root}: all {len(empty)} documents have empty text "
                f"(e.g. {empty[0][0]!r} at {empty[0][1]})"
            )
        if len(read) == 1:
            raise DataError(f"{read[0]}: no records (empty corpus file)")
        if read:
            raise DataError(
                f"empty corpus under {root}: no records in any of {len(read)} files "
                f"(e.g. {read[0]})"
            )
        what = (
            f"{len(skipped)} files, none with a suffix in {sorted(parser.suffixes)}"
            if skipped
            else "no files"
        )
        raise DataError(f"empty corpus under {root}: {what}")
    warnings: list[str] = []
    if empty:
        warnings.append(
            f"n_empty_documents={len(empty)}: documents with empty text left out of the corpus "
            f"(e.g. {empty[0][0]!r} at {empty[0][1]}; dataset.on_empty=fail refuses them)"
        )
    if refused:
        warnings.append(
            f"n_skipped_files={len(refused)}: files the parser refused, left out under "
            f"parser.on_error=skip (first: {refused[0][1]})"
        )
    return ParsedCorpus(tuple(docs), len(empty), tuple(warnings), tuple(files), tuple(refused))


def parse_corpus(
    parser: Parser, sources: Iterable[Path], root: Path, on_empty: str = "skip"
) -> list[Document]:
    """``read_corpus``'s documents; its warnings are logged."""
    corpus = read_corpus(parser, sources, root, on_empty)
    for w in corpus.warnings:
        log.warning(w)
    return list(corpus.documents)
