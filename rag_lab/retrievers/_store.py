"""What the vector-store retrievers share (Qdrant, LanceDB, pgvector): the dense retriever's
embeddings (its per-text cache, its embedder), the metadata filter pushed into the store, the
filter order, the permission restriction, and an index saved as vectors + payloads that any of
them rebuilds deterministically (an export carries it; a server loads it without encoding).

A store variant implements ``_create`` (hold these vectors and payloads) and ``_query`` (the
``k`` best rows per query vector under a ``Condition`` and an optional row restriction), with
scores equal to faiss flat's inner products."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import Any

import numpy as np

from rag_lab.embedder.base import Embedder
from rag_lab.ranking import ranked
from rag_lab.retrievers._where import Condition, Where
from rag_lab.retrievers.dense import DenseRetriever
from rag_lab.types import Chunk, Run
from rag_lab.validate import choice, integer

ORDERS = ("before", "after")
# a store's rows per query: (row, score) pairs, best first
Hits = list[list[tuple[int, float]]]


class StoreRetriever(DenseRetriever):
    """Args (every store):
    embedder: the query/document encoder (as the dense retriever's; its vectors are cached).
    equals, any_of, as_of, query_as_of: the metadata filter (``rag_lab.retrievers._where``):
        contract fields (``source_type``, ``section_type``, ``version``, ...) and the validity
        window on the query's ``as_of`` (or this date). Empty: no filter.
    filter_order: ``before`` pushes the filter into the store's search (the ``k`` best of the
        chunks that pass); ``after`` searches unfiltered to ``after_depth`` and filters the result
        (``null``: the whole ranking, full recall at any selectivity; a number: faster, and a
        query can get fewer than ``k``).
    after_depth: see ``filter_order``.
    """

    query_metadata_fields = ("as_of",)

    def __init__(
        self,
        embedder: Embedder,
        equals: Mapping[str, Any] | None = None,
        any_of: Mapping[str, Sequence[Any]] | None = None,
        as_of: str | None = None,
        query_as_of: bool = False,
        filter_order: str = "before",
        after_depth: int | None = None,
    ) -> None:
        super().__init__(embedder)
        self.where = Where(equals, any_of, as_of, query_as_of)
        self.filter_order = choice(filter_order, "filter_order", ORDERS)
        self.after_depth = (
            None if after_depth is None else integer(after_depth, "after_depth", ge=1)
        )
        self._payloads: list[dict[str, Any]] = []
        self._query_meta: dict[str, Mapping[str, Any]] = {}

    # -- what a store implements ----------------------------------------------------------------
    def _create(self, vectors: np.ndarray, payloads: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def _query(
        self, vectors: np.ndarray, k: int, cond: Condition | None, rows: np.ndarray | None
    ) -> Hits:
        raise NotImplementedError

    # -- shared -----------------------------------------------------------------------------------
    def set_query_metadata(self, metadata: Mapping[str, Mapping[str, Any]]) -> None:
        self._query_meta = dict(metadata)

    def index(self, chunks: Sequence[Chunk]) -> None:
        t0 = time.perf_counter()
        self._ids = [c.chunk_id for c in chunks]
        vecs, encoded = self._embed([c.index_text for c in chunks])
        t1 = time.perf_counter()
        self._payloads = [self.where.payload(c.metadata) for c in chunks]
        self._create(vecs, self._payloads)
        t2 = time.perf_counter()
        self.stats = {
            "embed_seconds": t1 - t0,
            "store_build_seconds": t2 - t1,
            "index_seconds": t2 - t0,
            "embedded_chunks": float(encoded),
            "embedding_cache_hit": float(encoded == 0),
        }

    def save_index(self, directory: Path) -> None:
        """``ids.json``, ``vectors.npy`` (float32) and ``payloads.json``: every store rebuilds
        from them, deterministically (``load_index``)."""
        (directory / "ids.json").write_text(json.dumps(self._ids))
        np.save(directory / "vectors.npy", self._vectors())
        (directory / "payloads.json").write_text(json.dumps(self._payloads))

    def load_index(self, directory: Path) -> None:
        ids = json.loads((directory / "ids.json").read_text())
        vecs = np.load(directory / "vectors.npy", allow_pickle=False)
        payloads = json.loads((directory / "payloads.json").read_text())
        if not (len(ids) == len(vecs) == len(payloads)):
            raise ValueError(
                f"{directory}: {len(vecs)} vectors and {len(payloads)} payloads for {len(ids)} ids"
            )
        self._ids, self._payloads = ids, payloads
        self._create(np.ascontiguousarray(vecs, dtype=np.float32), payloads)
        self.stats = {"index_loaded": 1.0}

    def _vectors(self) -> np.ndarray:
        raise NotImplementedError

    def retrieve(self, queries: Mapping[str, str], k: int) -> Run:
        return self._search(queries, k, None)

    def retrieve_within(self, queries: Mapping[str, str], k: int, allowed: Set[str]) -> Run:
        """Only the chunks in ``allowed``: a row restriction inside the store's search (with
        either filter order: a permission is never checked after the cut)."""
        return self._search(queries, k, allowed)

    def _search(self, queries: Mapping[str, str], k: int, allowed: Set[str] | None) -> Run:
        qids = list(queries)
        if not qids:
            return {}
        rows = (
            None
            if allowed is None
            else np.fromiter((i for i, c in enumerate(self._ids) if c in allowed), np.int64)
        )
        if rows is not None and not len(rows):
            return {q: {} for q in qids}
        vecs = np.ascontiguousarray(
            self.embedder.encode_queries([queries[q] for q in qids]), dtype=np.float32
        )
        groups: dict[Condition, list[int]] = {}
        for i, qid in enumerate(qids):
            cond = self.where.condition(self._query_meta.get(qid.split("\x1f", 1)[0]))
            groups.setdefault(cond, []).append(i)
        out: Run = {}
        for cond, members in groups.items():
            hits = self._filtered(vecs[members], k, cond, rows)
            for i, found in zip(members, hits):
                scores = {self._ids[r]: float(s) for r, s in found}
                out[qids[i]] = {c: scores[c] for c in ranked(scores)[:k]}
        return out

    def _filtered(self, vecs: np.ndarray, k: int, cond: Condition, rows: np.ndarray | None) -> Hits:
        if cond.empty or self.filter_order == "before":
            return self._query(vecs, k, None if cond.empty else cond, rows)
        depth = len(self._ids) if self.after_depth is None else max(k, self.after_depth)
        found = self._query(vecs, depth, None, rows)
        return [[(r, s) for r, s in hits if cond.matches(self._payloads[r])][:k] for hits in found]
