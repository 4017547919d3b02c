"""Weighted score fusion: normalise each retriever's scores per query, then a weighted sum."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rag_lab.fusion.base import all_query_ids, check_weights, top_k
from rag_lab.ranking import minmax
from rag_lab.types import Run
from rag_lab.validate import choice
from rag_lab.validate import weights as check_weight_values


def normalise(scores: dict[str, float], method: str) -> dict[str, float]:
    """Per-query normalisation: ``minmax`` is ``rag_lab.ranking.minmax`` (all-equal scores → 1),
    ``zscore`` gives all-equal scores 0."""
    if not scores:
        return {}
    vals = np.fromiter(scores.values(), dtype=np.float64)
    if method == "minmax":
        norm = minmax(vals)
    elif method == "zscore":
        sd = vals.std()
        norm = (vals - vals.mean()) / sd if sd > 0 else np.zeros_like(vals)
    else:
        raise ValueError(f"normalization must be 'minmax' or 'zscore', got {method!r}")
    return dict(zip(scores, norm.tolist()))


class WeightedFusion:
    """Args:
        weights: retriever name → weight ``>= 0`` (missing names weigh 1.0), e.g.
            ``{dense: 0.7, bm25: 0.3}``.
        normalization: ``minmax`` (to [0, 1] per query) or ``zscore`` (mean 0, sd 1 per query).
    A chunk absent from a retriever's top list gets that retriever's lowest normalised score for
    the query (0 under min-max): it was not retrieved, so it is treated as no better than the worst
    that was.
    """

    def __init__(
        self, weights: Mapping[str, float] | None = None, normalization: str = "minmax"
    ) -> None:
        self.weights = check_weight_values(weights)
        self.normalization = choice(normalization, "normalization", ("minmax", "zscore"))

    def fuse(self, runs: Mapping[str, Run], k: int) -> Run:
        check_weights(self.weights, runs)
        out: Run = {}
        for qid in all_query_ids(runs):
            normed = {
                name: normalise(run.get(qid, {}), self.normalization) for name, run in runs.items()
            }
            pool = set().union(*normed.values())
            acc = dict.fromkeys(pool, 0.0)
            for name, scores in normed.items():
                w = self.weights.get(name, 1.0)
                floor = min(scores.values()) if scores else 0.0
                for cid in pool:
                    acc[cid] += w * scores.get(cid, floor)
            out[qid] = top_k(acc, k)
        return out
