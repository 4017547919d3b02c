"""No chunking: each document is one chunk (the BEIR setting)."""

from __future__ import annotations

from collections.abc import Iterable

from rag_lab.chunker.base import SpanChunker
from rag_lab.types import Document


class NoneChunker(SpanChunker):
    """The whole document as a single chunk ``{doc_id}#0``."""

    def spans(self, doc: Document) -> Iterable[tuple[int, int]]:
        return [(0, len(doc.text))]
