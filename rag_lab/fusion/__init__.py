"""Fusion of several retrievers' runs: ``rrf``, ``weighted`` and ``routed`` (per-class weights)."""

from rag_lab.fusion.base import Fusion, QueryConditioned, Weighted
from rag_lab.fusion.routed import RoutedFusion
from rag_lab.fusion.rrf import RRFFusion
from rag_lab.fusion.weighted import WeightedFusion

__all__ = [
    "Fusion",
    "QueryConditioned",
    "RRFFusion",
    "RoutedFusion",
    "Weighted",
    "WeightedFusion",
]
