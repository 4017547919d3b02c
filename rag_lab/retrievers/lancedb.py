"""Dense retrieval in LanceDB, embedded (a folder of Lance files, no server). Flat (exact) search
by default, so rankings equal faiss flat's; the filter is LanceDB's SQL ``where``, applied before
the vector search (``prefilter``) or, with ``filter_order: after``, to its result."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rag_lab.embedder.base import Embedder
from rag_lab.retrievers._store import Hits, StoreRetriever
from rag_lab.retrievers._where import FROM, TO, Condition


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _column(field: str) -> str:
    return "f_" + "".join(ch if ch.isalnum() else "_" for ch in field)


class LanceDBRetriever(StoreRetriever):
    """Args (besides the store's: filter, filter order; ``rag_lab.retrievers._store``):
    path: the database folder; ``null``: a temporary folder, removed with the retriever (the
        stage cache and exports keep the vectors, not this folder).
    table: the table's name.
    """

    def __init__(
        self,
        embedder: Embedder,
        path: str | None = None,
        table: str = "chunks",
        equals: Mapping[str, Any] | None = None,
        any_of: Mapping[str, Sequence[Any]] | None = None,
        as_of: str | None = None,
        query_as_of: bool = False,
        filter_order: str = "before",
        after_depth: int | None = None,
    ) -> None:
        super().__init__(embedder, equals, any_of, as_of, query_as_of, filter_order, after_depth)
        self.path, self.table = path, table
        self._tmp: str | None = None
        self._table: Any = None
        self._matrix = np.zeros((0, 0), np.float32)

    def __del__(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def _create(self, vectors: np.ndarray, payloads: list[dict[str, Any]]) -> None:
        import lancedb
        import pyarrow as pa

        if self.path is None and self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="rag_lab_lancedb_")
        db = lancedb.connect(self.path or self._tmp)
        dim = int(vectors.shape[1]) if vectors.ndim == 2 else self.embedder.dimension
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel())
        columns: dict[str, Any] = {
            "row": pa.array(np.arange(len(vectors), dtype=np.int64)),
            "vector": pa.FixedSizeListArray.from_arrays(flat, dim),
            FROM: pa.array([p.get(FROM) for p in payloads], pa.int64()),
            TO: pa.array([p.get(TO) for p in payloads], pa.int64()),
        }
        for field in self.where.fields:  # each field a list of strings (array_has matches)
            columns[_column(field)] = pa.array(
                [p.get(field) or [] for p in payloads], pa.list_(pa.string())
            )
        self._table = db.create_table(self.table, data=pa.table(columns), mode="overwrite")
        self._matrix = vectors

    def _vectors(self) -> np.ndarray:
        return self._matrix

    @staticmethod
    def _sql(cond: Condition | None, rows: np.ndarray | None) -> str:
        parts: list[str] = []
        if rows is not None:
            parts.append(f"row IN ({', '.join(str(int(r)) for r in rows)})")
        if cond is not None:
            for field, value in cond.equals:
                parts.append(f"array_has({_column(field)}, {_quote(value)})")
            for field, values in cond.any_of:
                listed = ", ".join(_quote(v) for v in values)
                parts.append(f"array_has_any({_column(field)}, [{listed}])" if values else "false")
            if cond.on is not None:
                parts.append(f"({FROM} IS NULL OR {FROM} <= {cond.on})")
                parts.append(f"({TO} IS NULL OR {TO} >= {cond.on})")
        return " AND ".join(parts)

    def _query(
        self, vectors: np.ndarray, k: int, cond: Condition | None, rows: np.ndarray | None
    ) -> Hits:
        where = self._sql(cond, rows)
        out: Hits = []
        for v in vectors:
            search = (
                self._table.search(v).distance_type("dot").limit(k).select(["row", "_distance"])
            )
            if where:
                search = search.where(where, prefilter=True)
            found = search.to_arrow()
            # LanceDB's dot "distance" is 1 - the inner product
            out.append(
                list(
                    zip(
                        found["row"].to_pylist(),
                        (1.0 - np.asarray(found["_distance"], np.float64)).tolist(),
                    )
                )
            )
        return out
