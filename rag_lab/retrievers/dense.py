"""Dense retrieval: embed chunks once, search with faiss (exact inner product by default)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from rag_lab.embedder.base import Embedder
from rag_lab.retrievers.base import topk_to_run
from rag_lab.types import Chunk, Run


class DenseRetriever:
    """Args:
        embedder: the query/document encoder.
        index_type: ``flat`` (exact inner product), ``hnsw`` (graph ANN) or ``ivf`` (inverted lists,
            ``nlist`` centroids, ``nprobe`` searched). ANN trades recall for speed on large corpora.
        cache_dir: stage cache folder for document embeddings (``rag_lab.cache``); ``None`` = off.
            The key is the embedder's identity (model, weights hash, prompts, ...) plus the chunk
            texts, so re-running with another index type, fusion or metric never re-embeds.
    """

    def __init__(self, embedder: Embedder, index_type: str = "flat", hnsw_m: int = 32,
                 ef_search: int = 128, nlist: int = 256, nprobe: int = 16, cache_dir: str | None = None) -> None:
        if index_type not in ("flat", "hnsw", "ivf"):
            raise ValueError(f"index_type must be flat, hnsw or ivf, got {index_type!r}")
        self.embedder = embedder
        self.index_type, self.hnsw_m, self.ef_search = index_type, hnsw_m, ef_search
        self.nlist, self.nprobe = nlist, nprobe
        self.cache_dir = cache_dir
        self.stats: dict[str, float] = {}
        self._ids: list[str] = []

    @property
    def identity(self) -> dict:
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
            nlist = max(1, min(self.nlist, len(vecs) // 39))  # faiss wants >= 39 points per centroid
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
            index.train(vecs)
            index.nprobe = min(self.nprobe, nlist)
        index.add(vecs)
        return index

    def index(self, chunks: Sequence[Chunk]) -> None:
        t0 = time.perf_counter()
        self._ids = [c.chunk_id for c in chunks]
        texts = [c.index_text for c in chunks]
        vecs, cached = None, False
        if self.cache_dir:
            from rag_lab.cache import content_key, open_cache

            cache = open_cache(self.cache_dir)
            key = content_key(self.embedder.identity, texts)
            vecs = cache.get_array("embeddings", key)
            cached = vecs is not None
        if vecs is None:
            vecs = self.embedder.encode_documents(texts)
            if self.cache_dir:
                cache.put_array("embeddings", key, np.asarray(vecs, dtype=np.float32))
        t1 = time.perf_counter()
        self._index = self._build(np.ascontiguousarray(vecs, dtype=np.float32))
        t2 = time.perf_counter()
        self.stats = {"embed_seconds": t1 - t0, "index_seconds": t2 - t0, "embedding_cache_hit": float(cached)}
        if not cached:  # a cache hit measures the disk, not the encoder
            self.stats["embed_docs_per_second"] = len(chunks) / max(t1 - t0, 1e-9)

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
        q = np.ascontiguousarray(self.embedder.encode_queries([queries[x] for x in qids]), dtype=np.float32)
        scores, idx = self._index.search(q, min(k, len(self._ids)))
        return topk_to_run(qids, self._ids, idx, scores)
