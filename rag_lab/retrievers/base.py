"""Retriever protocol: index chunks once, then answer batches of queries with scored chunk ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from rag_lab.types import Chunk, Run


@runtime_checkable
class Retriever(Protocol):
    """Contract: ``index`` takes the chunk list (it may keep only ids and what it needs);
    ``retrieve`` returns, per query id, at most ``k`` chunk ids with scores, higher = better.
    Chunks that do not match at all (BM25 score 0) are left out, so a query can get fewer than k.
    ``stats`` reports what indexing cost (seconds, items/s) for the run's metrics."""

    stats: dict[str, float]

    def index(self, chunks: Sequence[Chunk]) -> None: ...

    def retrieve(self, queries: Mapping[str, str], k: int) -> Run: ...


@runtime_checkable
class PersistentRetriever(Retriever, Protocol):
    """A retriever whose index can be written to and restored from a folder (stage cache, exports).
    ``save_index`` may raise ``NotImplementedError`` for a variant that cannot be persisted.
    ``chunk_ids`` are the ids the index holds (checked against the corpus on restore)."""

    @property
    def chunk_ids(self) -> list[str]: ...

    def save_index(self, directory: Path) -> None: ...

    def load_index(self, directory: Path) -> None: ...


@runtime_checkable
class FilteredRetriever(Retriever, Protocol):
    """A retriever that can search a subset of its chunks inside the index (a pre-filter: the
    ``k`` best of ``allowed``, not the ``k`` best filtered afterwards). Contract:
    ``retrieve_within`` returns, per query, at most ``k`` chunk ids, every one in ``allowed``,
    with the scores ``retrieve`` gives them. The pipeline calls it for permissions
    (``rag_lab.access``)."""

    def retrieve_within(self, queries: Mapping[str, str], k: int, allowed: Set[str]) -> Run: ...


def topk_to_run(
    qids: Sequence[str],
    ids: Sequence[str],
    idx: np.ndarray,
    scores: np.ndarray,
    drop_nonpositive: bool = False,
) -> Run:
    """Turn ``(n_queries, k)`` index/score matrices into a run, skipping faiss' ``-1`` padding."""
    run: Run = {}
    for qi, qid in enumerate(qids):
        row: dict[str, float] = {}
        for j, s in zip(idx[qi].tolist(), scores[qi].tolist()):
            if j < 0 or (drop_nonpositive and s <= 0):
                continue
            row[ids[j]] = float(s)
        run[qid] = row
    return run
