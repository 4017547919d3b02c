"""Post-processor protocol: the stages between retrieval and the answer stage (rerankers,
metadata filters, rule rerankers), composed as a list: ``postprocess=[freshness]``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from rag_lab.types import Chunk, Run


@runtime_checkable
class PostProcessor(Protocol):
    """Contract: ``process`` returns a new run over (a subset of) the chunk ids of ``run``, higher
    score = better, ties broken by ascending chunk id (``rag_lab.ranking.ranked``). It may drop
    chunks, never add ones the run lacks. Pure: ``run`` is not modified. ``chunks`` maps every
    chunk id of the corpus to its chunk (text, metadata)."""

    def process(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run: ...
