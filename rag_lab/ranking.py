"""The ranking rules every stage and metric shares (a leaf: imports nothing from rag_lab).

- ``ranked``: ids by descending score, ties broken by ascending id. Metrics rank with it, and so
  must every stage that cuts a run to a top k (fusion, reranking, training's hard-negative
  mining, dev evaluation), or a stage and the metrics could disagree on which of two tied chunks
  is "the top 5".
- ``minmax``: the one min-max normalisation (weighted fusion, the cross-encoder's interpolation
  with the first stage). Scores that are all equal (one candidate, or a scorer that cannot tell
  them apart) map to **ones**, not zeros: min-max maps the best score to 1, and with no spread
  every candidate *is* the best. Zeros would put a retrieved candidate level with "not retrieved"
  wherever a missing score is counted as 0, and a tie there is broken by id, so a retrieved chunk
  could fall behind one that was never retrieved. Ones keep every retrieved candidate above that
  floor; within the list a constant is a constant either way, so the order is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def ranked(scores: Mapping[str, float]) -> list[str]:
    """Ids by descending score; ties broken by ascending id (rag_lab's one tie rule).

    Two sorts in C instead of one with a Python key: by id, then stably by score (``reverse``
    keeps equal scores in their id order) — the order of ``key=(-score, id)``, ~3x faster."""
    ids = sorted(scores)
    ids.sort(key=scores.__getitem__, reverse=True)
    return ids


def top_k(scores: Mapping[str, float], k: int) -> dict[str, float]:
    """The ``k`` best of ``scores`` in ``ranked`` order (same tie rule)."""
    return {i: scores[i] for i in ranked(scores)[:k]}


def minmax(x: np.ndarray | Sequence[float]) -> np.ndarray:
    """``(x - min) / (max - min)`` as float64; all-equal scores → ones (see the module docstring);
    an empty input → an empty array."""
    a = np.asarray(x, dtype=np.float64)
    if a.size == 0:
        return a.copy()
    lo, span = float(a.min()), float(a.max() - a.min())
    return (a - lo) / span if span > 0 else np.ones_like(a)
