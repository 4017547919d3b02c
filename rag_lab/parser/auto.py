"""Dispatch by file suffix to one parser per format, for corpora that mix formats (manuals as
Markdown, tickets as JSONL)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from rag_lab.parser.base import LineLocated, Parser
from rag_lab.types import Document


class AutoParser:
    """Args:
    parsers: suffix (``.md``) → parser. Files with other suffixes are skipped (and counted by
        the corpus read (``rag_lab.pipeline.corpus``)'s empty-corpus check).
    """

    def __init__(self, parsers: Mapping[str, Parser]) -> None:
        self.parsers = {
            k.lower() if k.startswith(".") else f".{k.lower()}": v for k, v in parsers.items()
        }
        self.suffixes = tuple(self.parsers)

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
