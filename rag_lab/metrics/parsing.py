"""Parser quality against known source text: cell-level table accuracy and character error rate.

Both compare after the same normalisation (NFKC) and ignore whitespace: a full-width parenthesis,
a line break inside a cell or the spaces OCR puts between CJK characters are layout, not content.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

Table = Sequence[Sequence[str]]


def normalise(text: str) -> str:
    """NFKC without whitespace: the form both sides are compared in."""
    return "".join(unicodedata.normalize("NFKC", text).split())


def cell_accuracy(truth: Table, parsed: Table) -> float:
    """Share of the truth's cells (row ``i``, column ``j``) that the parsed table has, equal
    after normalisation, at the same position. Missing rows or columns count as wrong cells;
    extra parsed rows are not rewarded (they do not add truth cells)."""
    total = sum(len(row) for row in truth)
    if total == 0:
        return 1.0
    right = 0
    for i, row in enumerate(truth):
        got = parsed[i] if i < len(parsed) else ()
        for j, cell in enumerate(row):
            if j < len(got) and normalise(got[j]) == normalise(cell):
                right += 1
    return right / total


def best_cell_accuracy(truth: Table, candidates: Sequence[Table]) -> float:
    """``cell_accuracy`` against the best-matching parsed table (0.0 when there is none)."""
    return max((cell_accuracy(truth, t) for t in candidates), default=0.0)


def character_error_rate(reference: str, hypothesis: str) -> float:
    """Levenshtein distance over non-whitespace characters / reference length (rapidfuzz)."""
    from rapidfuzz.distance import Levenshtein

    ref, hyp = normalise(reference), normalise(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    return Levenshtein.distance(ref, hyp) / len(ref)
