"""Fixed-size windows with overlap, in characters or tokens."""

from __future__ import annotations

import re
from collections.abc import Iterable

from rag_lab.chunker.base import SpanChunker
from rag_lab.types import Document

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
# Pre-tokens: one CJK character, a run of other word characters, or one punctuation mark. This is
# how BERT-style tokenizers pre-split text, so a token window approximates a model-token window.
TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]")


class FixedSizeChunker(SpanChunker):
    """Args:
        size: window length in ``unit``s.
        overlap: units shared by consecutive windows (``0 <= overlap < size``).
        unit: ``chars`` or ``tokens`` (pre-tokens: CJK characters, words, punctuation).
    """

    def __init__(self, size: int = 512, overlap: int = 64, unit: str = "chars") -> None:
        if size <= 0 or not 0 <= overlap < size:
            raise ValueError(f"need size > 0 and 0 <= overlap < size, got size={size}, overlap={overlap}")
        if unit not in ("chars", "tokens"):
            raise ValueError(f"unit must be 'chars' or 'tokens', got {unit!r}")
        self.size, self.overlap, self.unit = size, overlap, unit

    def spans(self, doc: Document) -> Iterable[tuple[int, int]]:
        step = self.size - self.overlap
        if self.unit == "chars":
            n = len(doc.text)
            starts = range(0, max(n - self.overlap, 1), step)
            return [(s, min(s + self.size, n)) for s in starts]
        toks = [m.span() for m in TOKEN.finditer(doc.text)]
        if not toks:
            return []
        starts = range(0, max(len(toks) - self.overlap, 1), step)
        return [(toks[i][0], toks[min(i + self.size, len(toks)) - 1][1]) for i in starts]
