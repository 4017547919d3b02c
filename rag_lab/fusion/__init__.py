"""Fusion of several retrievers' runs: ``rrf`` and ``weighted``."""

from rag_lab.fusion.base import Fusion, Weighted
from rag_lab.fusion.rrf import RRFFusion
from rag_lab.fusion.weighted import WeightedFusion

__all__ = ["Fusion", "RRFFusion", "Weighted", "WeightedFusion"]
