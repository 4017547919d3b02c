"""Fixed-size windows with overlap, in characters or tokens."""

from __future__ import annotations

from collections.abc import Iterable

from rag_lab.chunker.base import SpanChunker
from rag_lab.text.patterns import CJK as _CJK  # noqa: F401  (old import path, kept)
from rag_lab.text.patterns import TOKEN
from rag_lab.types import Document
from rag_lab.validate import OptionError, choice, integer

__all__ = ["TOKEN", "FixedSizeChunker"]  # TOKEN lives in rag_lab.text; re-exported for old imports


class FixedSizeChunker(SpanChunker):
    """Args:
    size: window length in ``unit``s.
    overlap: units shared by consecutive windows (``0 <= overlap < size``).
    unit: ``chars`` or ``tokens`` (pre-tokens, ``rag_lab.text.TOKEN``: CJK characters, words,
        punctuation).
    """

    def __init__(self, size: int = 512, overlap: int = 64, unit: str = "chars") -> None:
        self.size = integer(size, "size", ge=1)
        self.overlap = integer(overlap, "overlap", ge=0)
        if self.overlap >= self.size:
            raise OptionError("overlap", overlap, f"must be < size ({self.size})")
        self.unit = choice(unit, "unit", ("chars", "tokens"))

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
