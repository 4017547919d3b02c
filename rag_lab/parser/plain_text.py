"""Plain text files: one document per file, id = path relative to the corpus root."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rag_lab.errors import DataError
from rag_lab.parser.base import relative_id
from rag_lab.types import Document


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start})") from None


class PlainTextParser:
    suffixes = (".txt",)

    def parse(self, path: Path, root: Path) -> Iterator[Document]:
        text = read_text(path).replace("\r\n", "\n")
        doc_id = relative_id(path, root)
        yield Document(doc_id, text, path.stem, {"source": f"{doc_id}{path.suffix}"})
