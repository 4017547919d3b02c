"""Plain text files: one document per file, id = path relative to the corpus root."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rag_lab.io.files import read_text
from rag_lab.parser.base import relative_id
from rag_lab.types import Document

__all__ = ["PlainTextParser", "read_text"]  # read_text lives in rag_lab.io (old import path kept)


class PlainTextParser:
    suffixes = (".txt",)

    def parse(self, path: Path, root: Path) -> Iterator[Document]:
        text = read_text(path)  # UTF-8 (BOM accepted), newlines already \n
        doc_id = relative_id(path, root)
        yield Document(doc_id, text, path.stem, {"source": f"{doc_id}{path.suffix}"})
