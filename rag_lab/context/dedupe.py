"""Near-duplicate removal across versions: of two chunks whose texts are nearly the same, keep
the newer version.

Rule: two chunks are near-duplicates when the token Jaccard similarity of their normalised texts
(``normalise_text``, then pre-tokens: CJK characters, words, numbers) is at least ``threshold``.
Of a group of near-duplicates the one kept is the newest: the highest ``version`` (compared as
numbers, ``2.10`` > ``2.9``), then the latest ``valid_from`` (ISO dates), then the better rank;
a chunk without a version or date loses to one with them. The kept chunk takes the best rank of
its group (the content was retrieved that high). On the sample corpus only the two HX-200
manual versions have such pairs (13 chunk pairs at Jaccard >= 0.6, 12 at >= 0.8).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rag_lab.text import TOKEN, normalise_text
from rag_lab.types import Chunk
from rag_lab.validate import number

_NUMBERS = re.compile(r"\d+")


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def tokens(text: str) -> frozenset[str]:
    return frozenset(TOKEN.findall(normalise_text(text)))


def recency(chunk: Chunk) -> tuple[tuple[int, ...], str]:
    """``(version numbers, valid_from)``; larger is newer, missing is oldest."""
    meta: Any = chunk.metadata
    version = tuple(int(n) for n in _NUMBERS.findall(str(meta.get("version") or "")))
    return version, str(meta.get("valid_from") or "")


class NearDuplicateFilter:
    """Args: ``threshold``: token Jaccard at or above which two chunks are near-duplicates
    (default 0.8; 1.0 drops only exact repeats). Counts what it dropped in ``stats``."""

    def __init__(self, threshold: float = 0.8) -> None:
        self.threshold = number(threshold, "threshold", gt=0, le=1)
        self.stats: dict[str, float] = {"dropped": 0.0}

    def apply(self, query: str, chunks: Sequence[Chunk]) -> list[Chunk]:
        toks = [tokens(c.text) for c in chunks]
        # group each chunk with the first earlier chunk it nearly duplicates (single link)
        group = list(range(len(chunks)))
        for i in range(len(chunks)):
            for j in range(i):
                if group[j] == j and jaccard(toks[i], toks[j]) >= self.threshold:
                    group[i] = j
                    break
        out: list[Chunk] = []
        for head in sorted(set(group)):
            members = [i for i, g in enumerate(group) if g == head]
            # newest first; among equals the better rank (lower index)
            keep = max(members, key=lambda i: (recency(chunks[i]), -i))
            out.append(chunks[keep])
        self.stats["dropped"] += len(chunks) - len(out)
        return out
