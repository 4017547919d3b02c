"""Reciprocal rank fusion (Cormack et al., 2009): ``score(d) = Σ_r w_r / (k + rank_r(d))``."""

from __future__ import annotations

from collections.abc import Mapping

from rag_lab.fusion.base import all_query_ids, check_weights
from rag_lab.ranking import ranked, top_k
from rag_lab.types import Run
from rag_lab.validate import number
from rag_lab.validate import weights as check_weight_values


class RRFFusion:
    """Args:
        k: rank offset (60 in the paper), ``>= 0``; larger k flattens the head of each list.
        weights: optional per-retriever weights (``>= 0``) keyed by retriever name (default 1
            each).
    Ranks are 1-based within each run (ties ordered by id, as everywhere in rag_lab).
    """

    def __init__(self, k: float = 60.0, weights: Mapping[str, float] | None = None) -> None:
        self.k = number(k, "k", ge=0)  # k + rank >= 1: no division by zero, no sign flip
        self.weights = check_weight_values(weights)

    def fuse(self, runs: Mapping[str, Run], k: int) -> Run:
        check_weights(self.weights, runs)
        out: Run = {}
        for qid in all_query_ids(runs):
            acc: dict[str, float] = {}
            for name, run in runs.items():
                w = self.weights.get(name, 1.0)
                for rank, cid in enumerate(ranked(run.get(qid, {})), 1):
                    acc[cid] = acc.get(cid, 0.0) + w / (self.k + rank)
            out[qid] = top_k(acc, k)
        return out
