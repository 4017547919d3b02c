"""Dense retrieval in PostgreSQL with the pgvector extension (``CREATE EXTENSION vector``), for
teams whose chunks live in their database. Sequential (exact) search by default: rankings equal
faiss flat's; the metadata filter and the permission restriction are SQL ``WHERE`` clauses.

The connection string comes from an environment variable (``dsn_env``), never from the config,
so no password reaches a file, a run folder or an export. Needs ``psycopg2`` (the ``server``
extra) and a server with the extension (Debian's PostgreSQL 15 packages have none).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_lab.embedder.base import Embedder
from rag_lab.errors import ConfigError
from rag_lab.retrievers._store import Hits, StoreRetriever
from rag_lab.retrievers._where import FROM, TO, Condition

INSERT_BATCH = 1000


def _column(field: str) -> str:
    return "f_" + "".join(ch if ch.isalnum() else "_" for ch in field)


def where_sql(cond: Condition | None, rows: np.ndarray | None) -> tuple[str, list[Any]]:
    """The ``WHERE`` clause (``""``: none) and its parameters for a condition and a row
    restriction: list fields are ``text[]`` columns, the window day ordinals (null: open)."""
    parts: list[str] = []
    params: list[Any] = []
    if rows is not None:
        parts.append("row = ANY(%s)")
        params.append([int(r) for r in rows])
    if cond is not None:
        for field, value in cond.equals:
            parts.append(f"%s = ANY({_column(field)})")
            params.append(value)
        for field, values in cond.any_of:
            parts.append(f"{_column(field)} && %s::text[]")
            params.append(list(values))
        if cond.on is not None:
            parts.append(f"({FROM} IS NULL OR {FROM} <= %s) AND ({TO} IS NULL OR {TO} >= %s)")
            params += [cond.on, cond.on]
    return ("WHERE " + " AND ".join(parts)) if parts else "", params


class PgvectorRetriever(StoreRetriever):
    """Args (besides the store's: filter, filter order; ``rag_lab.retrievers._store``):
    dsn_env: environment variable holding the connection string (``postgresql://...``).
    table: the table's name; ``null``: ``rag_lab_<hash of the chunk ids>``. It is dropped and
        written again on every build (the stage cache and exports keep the vectors).
    """

    def __init__(
        self,
        embedder: Embedder,
        dsn_env: str = "RAG_LAB_PGVECTOR_DSN",
        table: str | None = None,
        equals: Mapping[str, Any] | None = None,
        any_of: Mapping[str, Sequence[Any]] | None = None,
        as_of: str | None = None,
        query_as_of: bool = False,
        filter_order: str = "before",
        after_depth: int | None = None,
    ) -> None:
        super().__init__(embedder, equals, any_of, as_of, query_as_of, filter_order, after_depth)
        self.dsn_env, self.table = dsn_env, table
        self._conn: Any = None
        self._name = ""
        self._matrix = np.zeros((0, 0), np.float32)

    def _connect(self) -> Any:
        dsn = os.environ.get(self.dsn_env, "")
        if not dsn:
            raise ConfigError(
                f"retrievers.pgvector: the environment variable {self.dsn_env} (dsn_env) is unset"
            )
        try:
            import psycopg2
        except ImportError:
            raise ConfigError(
                "retrievers.pgvector needs psycopg2: pip install 'rag-lab[server]'"
            ) from None
        try:
            conn = psycopg2.connect(dsn)
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg2.Error as exc:
            # the class only: a server's message can echo the connection string (a password)
            raise ConfigError(
                f"retrievers.pgvector: cannot connect with {self.dsn_env} or create the vector "
                f"extension ({type(exc).__name__}, code {exc.pgcode})"
            ) from None
        return conn

    def _create(self, vectors: np.ndarray, payloads: list[dict[str, Any]]) -> None:
        if self._conn is None:
            self._conn = self._connect()
        digest = hashlib.sha256("\n".join(self._ids).encode()).hexdigest()[:16]
        self._name = self.table or f"rag_lab_{digest}"
        dim = int(vectors.shape[1]) if vectors.ndim == 2 else self.embedder.dimension
        fields = list(self.where.fields)
        cols = ", ".join(f"{_column(f)} text[]" for f in fields)
        with self._conn.cursor() as cur:
            cur.execute(f'DROP TABLE IF EXISTS "{self._name}"')
            cur.execute(
                f'CREATE TABLE "{self._name}" (row integer PRIMARY KEY, embedding vector({dim}), '
                f"{FROM} integer, {TO} integer, {cols})"
            )
            names = ", ".join(["row", "embedding", FROM, TO, *(_column(f) for f in fields)])
            marks = ", ".join(["%s", "%s::vector", "%s", "%s", *("%s" for _ in fields)])
            for start in range(0, len(vectors), INSERT_BATCH):
                cur.executemany(
                    f'INSERT INTO "{self._name}" ({names}) VALUES ({marks})',
                    [
                        (
                            i,
                            "[" + ",".join(repr(float(x)) for x in vectors[i]) + "]",
                            payloads[i].get(FROM),
                            payloads[i].get(TO),
                            *(payloads[i].get(f) or [] for f in fields),
                        )
                        for i in range(start, min(start + INSERT_BATCH, len(vectors)))
                    ],
                )
        self._matrix = vectors

    def save_index(self, directory: Path) -> None:
        """Not persisted: the database is the index (and an export would name a database by an
        environment variable of the host that loads it). The stage cache keeps the vectors."""
        raise NotImplementedError("pgvector: the database is the index; it is not exported")

    def _vectors(self) -> np.ndarray:
        return self._matrix

    def _query(
        self, vectors: np.ndarray, k: int, cond: Condition | None, rows: np.ndarray | None
    ) -> Hits:
        where, params = where_sql(cond, rows)
        out: Hits = []
        with self._conn.cursor() as cur:
            for v in vectors:
                literal = "[" + ",".join(repr(float(x)) for x in v) + "]"
                # <#> is the negative inner product
                cur.execute(
                    f'SELECT row, -(embedding <#> %s::vector) FROM "{self._name}" {where} '
                    "ORDER BY embedding <#> %s::vector, row LIMIT %s",
                    [literal, *params, literal, k],
                )
                out.append([(int(r), float(s)) for r, s in cur.fetchall()])
        return out
