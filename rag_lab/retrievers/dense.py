"""Dense retrieval: embed chunks once, search with faiss (exact inner product by default)."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.cache.keys import content_key, model_table, text_key
from rag_lab.embedder import store as matrix_store
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
IVF_MIN_POINTS = 39  # faiss wants >= 39 training points per centroid


class DenseRetriever:
    """Args:
        embedder: the query/document encoder.
        index_type: ``flat`` (exact inner product), ``hnsw`` (graph ANN) or ``ivf`` (inverted lists,
            ``nlist`` centroids, ``nprobe`` searched). ANN trades recall for speed on large corpora.
        hnsw_m, ef_construction, ef_search: HNSW links per node, candidate list while building
            (faiss' default 40) and while searching.
        nlist, nprobe, train_size: IVF centroids, lists searched per query, and how many vectors
            (a seeded uniform sample; all when the corpus is smaller) train the k-means.
        store: ``memory`` keeps the corpus' embedding matrix in RAM; ``memmap`` streams it to a
            memory-mapped file in the cache, one encode block at a time, and builds the index
            from it in slices (``rag_lab.embedder.store``): the encode holds one block, not the
            corpus. The faiss index itself still holds every vector (flat, HNSW, IVF-flat).
        store_dtype: ``float32`` or ``float16`` (half the bytes; scores move by ~1e-3).
        cache_dir: deprecated and ignored (configs written before 0.2 set it): the pipeline
            hands the retriever a view of the stage cache's ``embeddings`` namespace instead.

    Embeddings are cached one per chunk text, in a table named by the embedder's identity (model,
    weights hash, prompts, ...): another index type, fusion or metric never re-embeds, and an
    edited document re-embeds only its own chunks. A ``memmap`` matrix is cached too, keyed by
    the embedder's identity, the dtype and the ordered chunk texts.
    """

    cache_namespace = "embeddings"

    def __init__(
        self,
        embedder: Embedder,
        index_type: str = "flat",
        hnsw_m: int = 32,
        ef_construction: int = 40,
        ef_search: int = 128,
        nlist: int = 256,
        nprobe: int = 16,
        train_size: int = 65536,
        store: str = "memory",
        store_dtype: str = "float32",
        cache_dir: str | None = None,
    ) -> None:
        self.embedder = embedder
        self.index_type = choice(index_type, "index_type", ("flat", "hnsw", "ivf"))
        self.hnsw_m = integer(hnsw_m, "hnsw_m", ge=2)  # M=1 crashes faiss (segfault)
        self.ef_construction = integer(ef_construction, "ef_construction", ge=1)
        self.ef_search = integer(ef_search, "ef_search", ge=1)
        self.nlist = integer(nlist, "nlist", ge=1)
        self.nprobe = integer(nprobe, "nprobe", ge=1)
        self.train_size = integer(train_size, "train_size", ge=IVF_MIN_POINTS)
        self.store = choice(store, "store", matrix_store.STORES)
        self.store_dtype = choice(store_dtype, "store_dtype", matrix_store.DTYPES)
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

    def _build(self, vecs: np.ndarray) -> Any:
        """The faiss index over ``vecs`` (an array or a memmap of any float dtype), added in
        ``SLICE_ROWS`` slices (``rag_lab.embedder.store``) unless it is one float32 array."""
        import faiss

        d = vecs.shape[1]
        index: faiss.Index
        if self.index_type == "flat":
            index = faiss.IndexFlatIP(d)
        elif self.index_type == "hnsw":
            index = faiss.IndexHNSWFlat(d, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.ef_construction
            index.hnsw.efSearch = self.ef_search
        else:
            sample = matrix_store.sample_rows(vecs, self.train_size)
            nlist = max(1, min(self.nlist, len(sample) // IVF_MIN_POINTS))
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
            index.train(sample)
            del sample
            index.nprobe = min(self.nprobe, nlist)
        if isinstance(vecs, np.memmap) or vecs.dtype != np.float32:
            for part in matrix_store.float32_slices(vecs):
                index.add(part)
        else:
            index.add(np.ascontiguousarray(vecs))
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

    def _stream(self, texts: list[str], folder: Path) -> int:
        """Write the vectors of ``texts`` into ``folder``'s memmap, one ``ENCODE_BLOCK`` at a time
        (each block read from / added to the per-text table); returns how many were encoded."""
        writer = matrix_store.MemmapWriter(
            folder, len(texts), self.embedder.dimension, self.store_dtype
        )
        encoded = 0
        for start in range(0, len(texts), ENCODE_BLOCK):
            vecs, n = self._embed(texts[start : start + ENCODE_BLOCK])
            writer.write(vecs)
            encoded += n
            if len(texts) > ENCODE_BLOCK:
                log.info("dense: stored %d / %d chunk vectors", writer.rows, len(texts))
        writer.close()
        return encoded

    def _memmap(self, texts: list[str]) -> tuple[np.ndarray, int, Path | None]:
        """The memmap of ``texts``' vectors, how many were encoded, and a temporary folder to
        remove once the index is built (``None`` when the matrix lives in the cache)."""
        spec = (len(texts), self.embedder.dimension, self.store_dtype)
        if self._cache is not None:
            key = content_key(
                {"embedder": self.embedder.identity, "dtype": self.store_dtype}, texts
            )
            entry = self._cache.get_dir(key)
            if entry is not None:
                try:
                    return matrix_store.open_matrix(entry, *spec), 0, None
                except (OSError, ValueError) as exc:
                    self._cache.cache.corrupt(self.cache_namespace, entry, exc, was_hit=True)
            encoded = [0]

            def fill(folder: Path) -> None:
                encoded[0] = self._stream(texts, folder)

            entry = self._cache.put_dir(key, fill)
            if entry is not None:
                return matrix_store.open_matrix(entry, *spec), encoded[0], None
        # no cache (or it just went off): a temporary file, removed after the build
        tmp = Path(tempfile.mkdtemp(prefix="rag_lab_vectors_"))
        try:
            n = self._stream(texts, tmp)
            return matrix_store.open_matrix(tmp, *spec), n, tmp
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def index(self, chunks: Sequence[Chunk]) -> None:
        t0 = time.perf_counter()
        self._ids = [c.chunk_id for c in chunks]
        texts = [c.index_text for c in chunks]
        tmp: Path | None = None
        if self.store == "memmap" and texts:
            vecs, encoded, tmp = self._memmap(texts)
        else:
            vecs, encoded = self._embed(texts)
            if self.store_dtype != "float32":
                vecs = vecs.astype(self.store_dtype)
        t1 = time.perf_counter()
        try:
            self._index = self._build(vecs)
        finally:
            del vecs
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
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
