"""Dense retrieval: embed chunks once, search with faiss (exact inner product by default)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.cache.keys import model_table, text_key
from rag_lab.embedder.base import Embedder
from rag_lab.retrievers.base import topk_to_run
from rag_lab.types import Chunk, Run
from rag_lab.validate import choice, integer

if TYPE_CHECKING:
    from rag_lab.cache import CacheView

log = logging.getLogger(__name__)
ENCODE_BLOCK = (
    2048  # texts encoded between writes to the cache: an interrupted encode keeps its work
)


class DenseRetriever:
    """Args:
        embedder: the query/document encoder.
        index_type: ``flat`` (exact inner product), ``hnsw`` (graph ANN) or ``ivf`` (inverted lists,
            ``nlist`` centroids, ``nprobe`` searched). ANN trades recall for speed on large corpora.
        cache_dir: deprecated and ignored (configs written before 0.2 set it): the pipeline
            hands the retriever a view of the stage cache's ``embeddings`` namespace instead.

    Embeddings are cached one per chunk text, in a table named by the embedder's identity (model,
    weights hash, prompts, ...): another index type, fusion or metric never re-embeds, and an
    edited document re-embeds only its own chunks.
    """

    cache_namespace = "embeddings"

    def __init__(
        self,
        embedder: Embedder,
        index_type: str = "flat",
        hnsw_m: int = 32,
        ef_search: int = 128,
        nlist: int = 256,
        nprobe: int = 16,
        cache_dir: str | None = None,
    ) -> None:
        self.embedder = embedder
        self.index_type = choice(index_type, "index_type", ("flat", "hnsw", "ivf"))
        self.hnsw_m = integer(hnsw_m, "hnsw_m", ge=2)  # M=1 crashes faiss (segfault)
        self.ef_search = integer(ef_search, "ef_search", ge=1)
        self.nlist = integer(nlist, "nlist", ge=1)
        self.nprobe = integer(nprobe, "nprobe", ge=1)
        if cache_dir:
            log.warning("retrievers.*.cache_dir is ignored: the stage cache is set by cache.dir")
        self.stats: dict[str, float] = {}
        self._ids: list[str] = []
        self._cache: CacheView | None = None

    def attach_cache(self, view: CacheView) -> None:
        self._cache = view

    @property
    def chunk_ids(self) -> list[str]:
        return list(self._ids)

    @property
    def identity(self) -> dict[str, Any]:
        """What defines this retriever's results beyond its config: the embedder's identity."""
        return {"embedder": self.embedder.identity}

    def _build(self, vecs: np.ndarray):
        import faiss

        d = vecs.shape[1]
        index: faiss.Index
        if self.index_type == "flat":
            index = faiss.IndexFlatIP(d)
        elif self.index_type == "hnsw":
            index = faiss.IndexHNSWFlat(d, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efSearch = self.ef_search
        else:
            nlist = max(
                1, min(self.nlist, len(vecs) // 39)
            )  # faiss wants >= 39 points per centroid
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
            index.train(vecs)
            index.nprobe = min(self.nprobe, nlist)
        index.add(vecs)
        return index

    def _embed(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """Vectors of ``texts`` in order, and how many were encoded (the rest read from the
        cache)."""
        keys = [text_key(t) for t in texts]
        table = model_table(self.embedder.identity) if self._cache is not None else ""
        known = self._cache.get_vectors(table, keys) if self._cache is not None else {}
        todo = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in known))
        for start in range(0, len(todo), ENCODE_BLOCK):
            block = todo[start : start + ENCODE_BLOCK]
            vecs = np.asarray(self.embedder.encode_documents(block), dtype=np.float32)
            fresh = {text_key(t): v for t, v in zip(block, vecs)}
            if self._cache is not None:
                self._cache.put_vectors(table, fresh)
            known.update(fresh)
            if len(todo) > ENCODE_BLOCK:
                log.info("dense: encoded %d / %d new chunk texts", start + len(block), len(todo))
        if not texts:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32), 0
        return np.stack([known[k] for k in keys]), len(todo)

    def index(self, chunks: Sequence[Chunk]) -> None:
        t0 = time.perf_counter()
        self._ids = [c.chunk_id for c in chunks]
        vecs, encoded = self._embed([c.index_text for c in chunks])
        t1 = time.perf_counter()
        self._index = self._build(np.ascontiguousarray(vecs, dtype=np.float32))
        t2 = time.perf_counter()
        self.stats = {
            "embed_seconds": t1 - t0,
            "index_seconds": t2 - t0,
            "embedded_chunks": float(encoded),
            "embedding_cache_hit": float(encoded == 0),
        }
        if encoded:  # a cache hit measures the disk, not the encoder
            self.stats["embed_docs_per_second"] = encoded / max(t1 - t0, 1e-9)

    def save_index(self, directory: Path) -> None:
        """Write chunk ids and the faiss index into an empty ``directory``."""
        import faiss

        (directory / "ids.json").write_text(json.dumps(self._ids))
        faiss.write_index(self._index, str(directory / "index.faiss"))

    def load_index(self, directory: Path) -> None:
        """Restore what ``save_index`` wrote: no encoding, no index build. Queries still need the
        embedder (loaded lazily on the first ``retrieve``)."""
        import faiss

        self._ids = json.loads((directory / "ids.json").read_text())
        self._index = faiss.read_index(str(directory / "index.faiss"))
        if self.index_type == "hnsw":
            self._index.hnsw.efSearch = self.ef_search
        elif self.index_type == "ivf":
            ivf = faiss.extract_index_ivf(self._index)
            ivf.nprobe = min(self.nprobe, ivf.nlist)
        self.stats = {"index_loaded": 1.0}

    def retrieve(self, queries: Mapping[str, str], k: int) -> Run:
        qids = list(queries)
        if not qids:
            return {}
        q = np.ascontiguousarray(
            self.embedder.encode_queries([queries[x] for x in qids]), dtype=np.float32
        )
        scores, idx = self._index.search(q, min(k, len(self._ids)))
        return topk_to_run(qids, self._ids, idx, scores)
