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


# one query's stored result for carrying across an edit: its chunks with scores, best first (at
# ``row_depth``), and its floor: no chunk outside the list scores above it (0.0 when the list holds
# every chunk that scores at all)
Row = tuple[dict[str, float], float]


@runtime_checkable
class IncrementalRetriever(PersistentRetriever, Protocol):
    """A retriever whose index follows an edit of the corpus in place, and which can tell which of
    its earlier per-query results are still exactly what a search would return.

    ``update(chunks, stale)`` is called on a retriever holding an earlier index (``load_index``):
    ``chunks`` is the new corpus in order, ``stale`` the ids of the earlier index whose chunk
    changed or went. Afterwards the index answers exactly as ``index(chunks)`` would; ``False``
    (nothing changed) when it cannot, and the caller indexes from scratch.
    ``row_depth(k)``: how many results a stored row keeps for a run at depth ``k`` (more than
    ``k`` when ``carry`` needs to bound what lies below).
    ``carry(queries, rows, k)``: of ``rows`` (per query, its results over the index before the
    last ``update``), the ones still exact over the updated index, with their new scores and
    floors; a query left out must be searched. ``{}`` when no ``update`` preceded it."""

    def update(self, chunks: Sequence[Chunk], stale: Set[str]) -> bool: ...

    def row_depth(self, k: int) -> int: ...

    def carry(
        self, queries: Mapping[str, str], rows: Mapping[str, Row], k: int
    ) -> dict[str, Row]: ...


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
