"""Parser protocol: a corpus source file → documents under the metadata contract."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

from rag_lab.errors import DataError
from rag_lab.types import Document


@runtime_checkable
class Parser(Protocol):
    """Reads one file and yields its documents.

    Contract: ``suffixes`` lists the file endings it reads (``.jsonl``); ``parse(path, root)``
    yields documents with stable ids (from the record, front matter, or the path relative to
    ``root`` without its suffix) and ``metadata['source']`` set to that relative path. Bad input
    raises ``DataError`` naming the file (and line).
    """

    suffixes: tuple[str, ...]

    def parse(self, path: Path, root: Path) -> Iterator[Document]: ...


def relative_id(path: Path, root: Path) -> str:
    try:
        rel = path.relative_to(root)
    except ValueError:
        rel = Path(path.name)
    return rel.with_suffix("").as_posix()


def parse_corpus(parser: Parser, sources: Iterable[Path], root: Path) -> list[Document]:
    """Parse every source whose suffix the parser reads; refuse duplicate ids and empty corpora."""
    docs: list[Document] = []
    origin: dict[str, str] = {}
    skipped = []
    for path in sources:
        if path.suffix.lower() not in parser.suffixes:
            skipped.append(path)
            continue
        for doc in parser.parse(path, root):
            where = str(path)
            if doc.doc_id in origin:
                raise DataError(
                    f"duplicate document id {doc.doc_id!r} in {where} "
                    f"(first seen in {origin[doc.doc_id]})"
                )
            if not doc.text.strip():
                raise DataError(f"{where}: document {doc.doc_id!r} has no text")
            origin[doc.doc_id] = where
            docs.append(doc)
    if not docs:
        what = (
            f"{len(skipped)} files, none with a suffix in {sorted(parser.suffixes)}"
            if skipped
            else "no files"
        )
        raise DataError(f"empty corpus under {root}: {what}")
    return docs
