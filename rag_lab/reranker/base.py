"""Reranker protocol: re-score the head of a fused run (default: no reranker)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from rag_lab.types import Chunk, Run


@runtime_checkable
class Reranker(Protocol):
    """Contract: re-scores at most ``depth`` top chunks per query (higher = better); chunks below
    the depth keep their order after the reranked head. Pure: the input run is not modified.

    A reranker is a post-processor (``rag_lab.postprocess.PostProcessor``): ``process`` is
    ``rerank``, so it composes in ``postprocess=[...]`` and in the ``reranker`` group alike."""

    depth: int

    def rerank(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run: ...

    def process(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run: ...
