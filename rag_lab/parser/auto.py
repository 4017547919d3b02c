"""Dispatch by file suffix to one parser per format, for corpora that mix formats (manuals as
Markdown, tickets as JSONL)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from rag_lab.parser.base import LineLocated, Parser, Selective
from rag_lab.types import Document


class AutoParser:
    """Args:
    parsers: suffix (``.md``) → parser; a ``None`` entry reads no file of that suffix. Files
        with other suffixes are left out and counted by the corpus read
        (``rag_lab.pipeline.corpus``: ``n_unread_files``), as are those a ``Selective`` entry
        does not read as configured (a SQLite file without a query).
    """

    def __init__(self, parsers: Mapping[str, Parser]) -> None:
        self.parsers = {
            k.lower() if k.startswith(".") else f".{k.lower()}": v
            for k, v in parsers.items()
            if v is not None
        }
        self.suffixes = tuple(self.parsers)

    def unread(self, path: Path) -> str | None:
        """Why the entry for ``path``'s suffix leaves it out (``Selective``), naming the entry."""
        parser = self.parsers.get(path.suffix.lower())
        why = parser.unread(path) if isinstance(parser, Selective) else None
        return f"{why} (parser.parsers.{path.suffix.lower().lstrip('.')})" if why else None

    def parse(self, path: Path, root: Path) -> Iterator[Document]:
        yield from self.parsers[path.suffix.lower()].parse(path, root)

    def parse_lines(self, path: Path, root: Path) -> Iterator[tuple[int | None, Document]]:
        """Lines from the suffix's parser when it knows them (``LineLocated``), else ``None``."""
        parser = self.parsers[path.suffix.lower()]
        if isinstance(parser, LineLocated):
            yield from parser.parse_lines(path, root)
        else:
            for doc in parser.parse(path, root):
                yield None, doc
