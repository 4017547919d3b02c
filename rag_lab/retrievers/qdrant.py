"""Dense retrieval in Qdrant: embedded (qdrant-client's local mode, in memory or in a folder) or a
Qdrant server (``base_url``). Exact search by default (local mode is always exact, brute force;
on a server ``exact: true`` skips the HNSW graph), so rankings equal faiss flat's."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rag_lab.embedder.base import Embedder
from rag_lab.errors import ConfigError
from rag_lab.retrievers._store import Hits, StoreRetriever
from rag_lab.retrievers._where import FROM, TO, Condition
from rag_lab.validate import boolean, integer

log = logging.getLogger(__name__)
UPLOAD_BATCH = 1024  # points per upload request


class QdrantRetriever(StoreRetriever):
    """Args (besides the store's: filter, filter order; ``rag_lab.retrievers._store``):
    base_url: a Qdrant server (``http://host:6333``); ``null``: embedded, in this process. An
        export never takes it from its file (``rag_lab.export.portable``): a loaded export
        serves embedded, rebuilt from the vectors it carries, unless the caller names a server.
    path: embedded mode's folder (``null``: in memory). One process at a time may open a folder
        (qdrant-client locks it); exports and the stage cache keep vectors, not this folder.
    collection: the collection's name; ``null``: ``rag_lab_<hash of the chunk ids>``.
    exact: exact search on a server (local mode is always exact).
    api_key_env: environment variable holding a server's API key (never the key itself).
    timeout: seconds a server request may take.
    """

    def __init__(
        self,
        embedder: Embedder,
        base_url: str | None = None,
        path: str | None = None,
        collection: str | None = None,
        exact: bool = True,
        api_key_env: str | None = None,
        timeout: int = 30,
        equals: Mapping[str, Any] | None = None,
        any_of: Mapping[str, Sequence[Any]] | None = None,
        as_of: str | None = None,
        query_as_of: bool = False,
        filter_order: str = "before",
        after_depth: int | None = None,
    ) -> None:
        super().__init__(embedder, equals, any_of, as_of, query_as_of, filter_order, after_depth)
        if base_url and path:
            raise ConfigError(
                "retrievers.qdrant: set base_url (a server) or path (embedded), not both"
            )
        self.base_url, self.path, self.collection = base_url, path, collection
        self.exact = boolean(exact, "exact")
        self.api_key_env = api_key_env
        self.timeout = integer(timeout, "timeout", ge=1)
        self._client: Any = None
        self._name = ""
        self._matrix = np.zeros((0, 0), np.float32)

    def _connect(self) -> Any:
        import os

        from qdrant_client import QdrantClient

        if self.base_url:
            key = os.environ.get(self.api_key_env) if self.api_key_env else None
            return QdrantClient(url=self.base_url, api_key=key, timeout=self.timeout)
        return QdrantClient(path=self.path) if self.path else QdrantClient(":memory:")

    def _create(self, vectors: np.ndarray, payloads: list[dict[str, Any]]) -> None:
        from qdrant_client import models

        if self._client is None:
            self._client = self._connect()
        digest = hashlib.sha256("\n".join(self._ids).encode()).hexdigest()[:16]
        self._name = self.collection or f"rag_lab_{digest}"
        dim = int(vectors.shape[1]) if vectors.ndim == 2 else self.embedder.dimension
        if self._client.collection_exists(self._name):
            self._client.delete_collection(self._name)
        self._client.create_collection(
            self._name,
            vectors_config=models.VectorParams(size=dim, distance=models.Distance.DOT),
        )
        for start in range(0, len(vectors), UPLOAD_BATCH):
            stop = min(start + UPLOAD_BATCH, len(vectors))
            self._client.upload_points(
                self._name,
                [
                    models.PointStruct(id=i, vector=vectors[i].tolist(), payload=payloads[i])
                    for i in range(start, stop)
                ],
                wait=True,
            )
        self._matrix = vectors

    def _vectors(self) -> np.ndarray:
        return self._matrix

    @staticmethod
    def _filter(cond: Condition | None, rows: np.ndarray | None) -> Any:
        from qdrant_client import models

        must: list[Any] = []
        if rows is not None:
            must.append(models.HasIdCondition(has_id=[int(r) for r in rows]))
        if cond is not None:
            for field, value in cond.equals:
                must.append(models.FieldCondition(key=field, match=models.MatchValue(value=value)))
            for field, values in cond.any_of:
                must.append(
                    models.FieldCondition(key=field, match=models.MatchAny(any=list(values)))
                )
            if cond.on is not None:
                for key, bound in (
                    (FROM, models.Range(lte=cond.on)),
                    (TO, models.Range(gte=cond.on)),
                ):
                    must.append(
                        models.Filter(
                            should=[
                                models.IsEmptyCondition(is_empty=models.PayloadField(key=key)),
                                models.FieldCondition(key=key, range=bound),
                            ]
                        )
                    )
        return models.Filter(must=must) if must else None

    def _query(
        self, vectors: np.ndarray, k: int, cond: Condition | None, rows: np.ndarray | None
    ) -> Hits:
        from qdrant_client import models

        flt = self._filter(cond, rows)
        params = models.SearchParams(exact=True) if self.base_url and self.exact else None
        requests = [
            models.QueryRequest(
                query=v.tolist(), limit=k, filter=flt, params=params, with_payload=False
            )
            for v in vectors
        ]
        replies = self._client.query_batch_points(self._name, requests=requests)
        return [[(int(p.id), float(p.score)) for p in r.points] for r in replies]
