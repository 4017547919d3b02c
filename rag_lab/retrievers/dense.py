"""Dense retrieval: embed chunks once, search with faiss (exact inner product by default)."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.cache.keys import content_key, model_table, text_key
from rag_lab.embedder import store as matrix_store
from rag_lab.embedder.base import Embedder
from rag_lab.retrievers.base import Row, topk_to_run
from rag_lab.runtime import threads
from rag_lab.types import Chunk, Run
from rag_lab.validate import choice, integer

if TYPE_CHECKING:
    from rag_lab.cache import CacheView

log = logging.getLogger(__name__)
ENCODE_BLOCK = 2048  # texts encoded per call to the embedder (and per memmap write)
IVF_MIN_POINTS = 39  # faiss wants >= 39 training points per centroid
# fresh vectors go to the per-text table in transactions of this many rows, or of what this many
# seconds encoded: each transaction rewrites the table's key-index pages it touched, a cost that
# grows with the table (1M rows written 2,048 at a time took 37 s; 65,536 at a time 11 s)
FLUSH_ROWS, FLUSH_SECONDS = 65536, 10.0


class _Pending:
    """Vectors encoded but not yet written to the per-text table (``flush`` writes them in one
    transaction; ``add`` flushes once ``FLUSH_ROWS`` rows or ``FLUSH_SECONDS`` have gathered)."""

    def __init__(self, cache: CacheView | None, identity: Any) -> None:
        self.cache = cache
        self.table = model_table(identity) if cache is not None else ""
        self.rows: dict[str, np.ndarray] = {}
        self.since = time.monotonic()

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors of ``keys`` already known: in the table or gathered here."""
        known = self.cache.get_vectors(self.table, keys) if self.cache is not None else {}
        if self.rows:
            known.update((k, self.rows[k]) for k in keys if k in self.rows)
        return known

    def add(self, fresh: Mapping[str, np.ndarray]) -> None:
        if self.cache is None:
            return
        self.rows.update(fresh)
        if len(self.rows) >= FLUSH_ROWS or time.monotonic() - self.since >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.cache is not None and self.rows:
            self.cache.put_vectors(self.table, self.rows)
        self.rows = {}
        self.since = time.monotonic()


def _reserve(index: Any, rows: int) -> None:
    """Size the vector buffer of ``index`` (flat, or HNSW's flat storage) for ``rows`` more
    vectors at once. faiss grows it on every ``add``, re-allocating and copying what it holds:
    1M 256-d rows added in 16 slices took a median 1.71 s, against 1.20 s reserved first (5
    alternating runs each)."""
    import faiss

    flat = faiss.downcast_index(index.storage) if isinstance(index, faiss.IndexHNSW) else index
    if isinstance(flat, faiss.IndexFlatCodes):
        held = flat.ntotal * flat.code_size
        flat.codes.resize(held + rows * flat.code_size)  # std::vector: the capacity stays
        flat.codes.resize(held)


def _stored_rows(index: Any) -> np.ndarray:
    """A flat index's vectors as an array: a view of its own storage (a memory-mapped index
    file's pages read where they lie), not ``reconstruct_n``'s copy of the whole matrix."""
    import faiss

    get_xb = getattr(index, "get_xb", None)
    if get_xb is None:
        return np.asarray(index.reconstruct_n(0, index.ntotal))
    flat = faiss.rev_swig_ptr(get_xb(), index.ntotal * index.d)
    return np.asarray(flat).reshape(index.ntotal, index.d)


class DenseRetriever:
    """Args:
        embedder: the query/document encoder.
        index_type: ``flat`` (exact inner product), ``hnsw`` (graph ANN) or ``ivf`` (inverted lists,
            ``nlist`` centroids, ``nprobe`` searched). ANN trades recall for speed on large corpora.
        hnsw_m, ef_construction, ef_search: HNSW links per node, candidate list while building
            (faiss' default 40) and while searching.
        hnsw_segment_rows: rows per HNSW graph. A larger corpus is indexed as consecutive
            segments of this many rows, one graph each, searched one after the other and merged
            by score (``faiss.IndexShards``), as Lucene indexes vectors per segment: the build
            costs ``n log(segment)``, linear in the corpus, where one graph costs ``n log n``;
            a query costs one graph search per segment. The default 20,000 keeps a 256-d
            graph (vectors and links, ~25 MB) inside a 32 MB last-level cache, where an insert
            costs the same at any graph size (README, scale curve). ``null``: one graph at any
            size.
        nlist, nprobe, train_size: IVF centroids, lists searched per query, and how many vectors
            (a seeded uniform sample; all when the corpus is smaller) train the k-means.
        store: ``memory`` keeps the corpus' embedding matrix in RAM; ``memmap`` streams it to a
            memory-mapped file in the cache, one encode block at a time, and builds the index
            from it in slices (``rag_lab.embedder.store``): the encode holds one block, not the
            corpus. A ``flat`` index over a ``float32`` matrix is that file, memory-mapped and
            searched in place: no build, no copy, and the vectors in the kernel's file cache,
            not the process' memory (the stage cache replaces an entry, never rewrites it, so a
            searched file does not change). HNSW and IVF-flat hold a copy of every vector.
        store_dtype: ``float32`` or ``float16`` (half the bytes; scores move by ~1e-3; a flat
            index over it holds a float32 copy).
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
        hnsw_segment_rows: int | None = 20_000,
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
        self.hnsw_segment_rows = (
            None
            if hnsw_segment_rows is None
            else integer(hnsw_segment_rows, "hnsw_segment_rows", ge=1)
        )
        self.nlist = integer(nlist, "nlist", ge=1)
        self.nprobe = integer(nprobe, "nprobe", ge=1)
        self.train_size = integer(train_size, "train_size", ge=IVF_MIN_POINTS)
        self.store = choice(store, "store", matrix_store.STORES)
        self.store_dtype = choice(store_dtype, "store_dtype", matrix_store.DTYPES)
        if cache_dir:
            log.warning("retrievers.*.cache_dir is ignored: the stage cache is set by cache.dir")
        self.stats: dict[str, float] = {}
        self._ids: list[str] = []
        self._parts: list[Any] = []
        self._index: Any = None
        self._cache: CacheView | None = None
        # what the last update added (ids, vectors) and made stale: carry reads it
        self._edit: tuple[list[str], np.ndarray, frozenset[str]] | None = None

    def attach_cache(self, view: CacheView) -> None:
        self._cache = view

    @property
    def chunk_ids(self) -> list[str]:
        return list(self._ids)

    @property
    def identity(self) -> dict[str, Any]:
        """What defines this retriever's results beyond its config: the embedder's identity."""
        return {"embedder": self.embedder.identity}

    def _hnsw(self, d: int) -> Any:
        import faiss

        index = faiss.IndexHNSWFlat(d, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.ef_construction
        index.hnsw.efSearch = self.ef_search
        return index

    def _segments(self, rows: int) -> list[tuple[int, int]]:
        """The row ranges of the HNSW graphs over ``rows`` vectors (one range when unsegmented)."""
        step = self.hnsw_segment_rows or max(rows, 1)
        return [(s, min(s + step, rows)) for s in range(0, max(rows, 1), step)]

    @staticmethod
    def _add(index: Any, vecs: np.ndarray) -> None:
        """Add ``vecs`` (an array or a memmap of any float dtype), in ``SLICE_ROWS`` slices unless
        it is one float32 array."""
        if isinstance(vecs, np.memmap) or vecs.dtype != np.float32:
            _reserve(index, len(vecs))
            for part in matrix_store.float32_slices(vecs):
                index.add(part)
        else:
            index.add(np.ascontiguousarray(vecs))

    def _use(self, parts: list[Any]) -> None:
        """Search ``parts`` (consecutive rows) as one index: ids offset by the rows before."""
        import faiss

        self._parts = parts
        self._index = parts[0]
        if len(parts) > 1:
            # searched in turn (not threaded), ids successive; faiss' stub lacks this signature
            self._index = faiss.IndexShards(parts[0].d, False, True)  # type: ignore[call-arg]
            for part in parts:
                self._index.add_shard(part)  # faiss' wrapper keeps a reference to each

    def _build(self, vecs: np.ndarray) -> list[Any]:
        """The faiss index over ``vecs`` (an array or a memmap of any float dtype): one per HNSW
        segment, otherwise one."""
        import faiss

        d = vecs.shape[1]
        if self.index_type == "hnsw":
            parts = []
            for start, stop in self._segments(len(vecs)):
                parts.append(self._hnsw(d))
                self._add(parts[-1], vecs[start:stop])
            return parts
        index: faiss.Index
        if self.index_type == "flat":
            path = matrix_store.flat_index_file(vecs)
            if path is not None:  # the stored matrix is an IndexFlatIP file: searched in place
                return [faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)]
            index = faiss.IndexFlatIP(d)
        else:
            sample = matrix_store.sample_rows(vecs, self.train_size)
            nlist = max(1, min(self.nlist, len(sample) // IVF_MIN_POINTS))
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
            index.train(sample)
            del sample
            index.nprobe = min(self.nprobe, nlist)
        self._add(index, vecs)
        return [index]

    def _embed(self, texts: list[str], pending: _Pending | None = None) -> tuple[np.ndarray, int]:
        """Vectors of ``texts`` in order, and how many were encoded (the rest read from the
        cache or from ``pending``, the vectors encoded since its last write to the cache)."""
        own = pending is None
        if pending is None:
            pending = _Pending(self._cache, self.embedder.identity)
        try:
            keys = [text_key(t) for t in texts]
            known = pending.get(keys)
            todo = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in known))
            for start in range(0, len(todo), ENCODE_BLOCK):
                threads.rebalance()  # a sweep worker: its share of the cores right now
                block = todo[start : start + ENCODE_BLOCK]
                vecs = np.asarray(self.embedder.encode_documents(block), dtype=np.float32)
                fresh = {text_key(t): v for t, v in zip(block, vecs)}
                pending.add(fresh)
                known.update(fresh)
                if len(todo) > ENCODE_BLOCK:
                    log.info(
                        "dense: encoded %d / %d new chunk texts", start + len(block), len(todo)
                    )
        finally:
            if own:
                pending.flush()
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
        pending = _Pending(self._cache, self.embedder.identity)
        try:
            for start in range(0, len(texts), ENCODE_BLOCK):
                vecs, n = self._embed(texts[start : start + ENCODE_BLOCK], pending)
                writer.write(vecs)
                encoded += n
                if len(texts) > ENCODE_BLOCK:
                    log.info("dense: stored %d / %d chunk vectors", writer.rows, len(texts))
        finally:
            pending.flush()  # an interrupted encode keeps what it encoded
        writer.close()
        return encoded

    def _memmap(self, texts: list[str]) -> tuple[np.ndarray, int, Path | None]:
        """The memmap of ``texts``' vectors, how many were encoded, and a temporary folder to
        remove once the index is built (``None`` when the matrix lives in the cache)."""
        spec = (len(texts), self.embedder.dimension, self.store_dtype)
        if self._cache is not None:
            layout = {"dtype": self.store_dtype, "file": matrix_store.FILE_NAMES[self.store_dtype]}
            key = content_key({"embedder": self.embedder.identity, **layout}, texts)
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
        self._edit = None
        texts = [c.index_text for c in chunks]
        tmp: Path | None = None
        if self.store == "memmap" and texts:
            vecs, encoded, tmp = self._memmap(texts)
        else:
            vecs, encoded = self._embed(texts)
            if self.store_dtype != "float32":
                vecs = vecs.astype(self.store_dtype)
        # freed before the build's clock: releasing a million references costs ~20 ms, more
        # than mapping a flat index file
        del texts
        t1 = time.perf_counter()
        try:
            self._use(self._build(vecs))
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
        """Write chunk ids and the faiss index into an empty ``directory``: ``index.faiss``, or
        one ``index.<i>.faiss`` per HNSW segment."""
        import faiss

        (directory / "ids.json").write_text(json.dumps(self._ids))
        if len(self._parts) == 1:
            faiss.write_index(self._parts[0], str(directory / "index.faiss"))
            return
        for i, part in enumerate(self._parts):
            faiss.write_index(part, str(directory / f"index.{i}.faiss"))

    def _maps_flat_files(self) -> bool:
        return self.index_type == "flat" and matrix_store.faiss_maps_flat_files()

    def load_index(self, directory: Path) -> None:
        """Restore what ``save_index`` wrote: no encoding, no index build. Queries still need the
        embedder (loaded lazily on the first ``retrieve``). Raises ``ValueError`` when the index
        files do not hold one vector per chunk id."""
        import faiss

        ids = json.loads((directory / "ids.json").read_text())
        single = directory / "index.faiss"
        if single.exists():
            files = [single]
        else:  # segments: as many as the saved ids need
            count = len(self._segments(len(ids)))
            files = [directory / f"index.{i}.faiss" for i in range(count)]
        # a flat index file is searched where it lies (memory-mapped): server workers share its
        # pages instead of each holding a copy
        flag = faiss.IO_FLAG_MMAP_IFC if self._maps_flat_files() else 0
        parts: list[Any] = [faiss.read_index(str(f), flag) for f in files]
        rows = sum(p.ntotal for p in parts)
        if rows != len(ids):
            raise ValueError(f"{directory}: the index holds {rows} vectors for {len(ids)} ids")
        for part in parts:
            if self.index_type == "hnsw":
                part.hnsw.efSearch = self.ef_search
            elif self.index_type == "ivf":
                ivf = faiss.extract_index_ivf(part)
                ivf.nprobe = min(self.nprobe, ivf.nlist)
        self._ids = ids
        self._use(parts)
        self._edit = None
        self.stats = {"index_loaded": 1.0}

    # -- edits ------------------------------------------------------------------------------------
    def update(self, chunks: Sequence[Chunk], stale: Set[str]) -> bool:
        """A flat in-memory float32 index of ``chunks`` from the loaded one: the unchanged
        chunks' vectors are copied from it, the others embedded (through the per-text cache),
        in the new order: the same vectors as ``index(chunks)`` adds. Other index types and
        stores: ``False`` (built again)."""
        if (
            self.index_type != "flat"
            or self.store != "memory"
            or self.store_dtype != "float32"
            or len(self._parts) != 1
        ):
            return False
        t0 = time.perf_counter()
        old = self._parts[0]
        where = {c: i for i, c in enumerate(self._ids)}
        source = np.fromiter(
            (-1 if c.chunk_id in stale else where.get(c.chunk_id, -1) for c in chunks),
            np.int64,
            len(chunks),
        )
        fresh = [c for c, i in zip(chunks, source.tolist()) if i < 0]
        vecs, encoded = self._embed([c.index_text for c in fresh])
        matrix = np.empty((len(chunks), old.d), dtype=np.float32)
        kept = source >= 0
        if kept.any():
            matrix[kept] = _stored_rows(old)[source[kept]]
        matrix[~kept] = vecs
        t1 = time.perf_counter()
        self._ids = [c.chunk_id for c in chunks]
        self._use(self._build(matrix))
        self._edit = ([c.chunk_id for c in fresh], vecs, frozenset(stale))
        t2 = time.perf_counter()
        self.stats = {
            "embed_seconds": t1 - t0,
            "index_seconds": t2 - t0,
            "embedded_chunks": float(encoded),
            "updated_chunks": float(len(fresh)),
        }
        return True

    def row_depth(self, k: int) -> int:
        return k

    def carry(self, queries: Mapping[str, str], rows: Mapping[str, Row], k: int) -> dict[str, Row]:
        """The rows still exact after the last ``update``: an unchanged chunk keeps its vector
        and so its score, so a row holding ``k`` chunks, none of them stale, stands when every
        new chunk scores below its ``k``-th score (by a margin for the float32 sums; a closer
        one is searched)."""
        if self._edit is None or not rows:
            return {}
        fresh, vecs, stale = self._edit
        qids = [q for q, (row, _) in rows.items() if len(row) >= k and not stale.intersection(row)]
        if not qids:
            return {}
        scores = np.zeros((len(qids), 0), dtype=np.float32)
        if fresh:
            q = np.ascontiguousarray(
                self.embedder.encode_queries([queries[x] for x in qids]), dtype=np.float32
            )
            scores = q @ vecs.T
        out: dict[str, Row] = {}
        for i, qid in enumerate(qids):
            row, floor = rows[qid]
            last = min(list(row.values())[:k])
            top = float(scores[i].max()) if scores.shape[1] else -np.inf
            if top < last - 1e-5 * max(1.0, abs(last), abs(top)):
                out[qid] = (dict(row), floor)
        return out

    def retrieve(self, queries: Mapping[str, str], k: int) -> Run:
        qids = list(queries)
        if not qids:
            return {}
        q = np.ascontiguousarray(
            self.embedder.encode_queries([queries[x] for x in qids]), dtype=np.float32
        )
        scores, idx = self._index.search(q, min(k, len(self._ids)))
        return topk_to_run(qids, self._ids, idx, scores)

    def _params(self, rows: np.ndarray, k: int) -> Any:
        """faiss search parameters that restrict a search to ``rows`` (an ``IDSelectorBatch``),
        of the index type's own class (HNSW keeps its ``efSearch``, at least ``k``; IVF its
        ``nprobe``)."""
        import faiss

        lib: Any = faiss  # faiss' stub lacks the search parameter classes' keywords
        sel = lib.IDSelectorBatch(rows.astype(np.int64))
        if self.index_type == "hnsw":
            return lib.SearchParametersHNSW(sel=sel, efSearch=max(self.ef_search, k))
        if self.index_type == "ivf":
            ivf = lib.extract_index_ivf(self._parts[0])
            return lib.SearchParametersIVF(sel=sel, nprobe=ivf.nprobe)
        return lib.SearchParameters(sel=sel)

    def retrieve_within(self, queries: Mapping[str, str], k: int, allowed: Set[str]) -> Run:
        """The ``k`` best of the chunks in ``allowed``: faiss searches with an id selector, so
        the others are never candidates (flat: exact; HNSW and IVF, as approximate as their
        unfiltered search, can return fewer than ``k`` when ``allowed`` is a small share). Each
        HNSW segment is searched with its own rows and the results merged by score."""
        qids = list(queries)
        if not qids:
            return {}
        rows = np.fromiter((i for i, c in enumerate(self._ids) if c in allowed), np.int64, count=-1)
        k = min(k, len(rows))
        if k == 0:
            return {q: {} for q in qids}
        q = np.ascontiguousarray(
            self.embedder.encode_queries([queries[x] for x in qids]), dtype=np.float32
        )
        found_s, found_i = [], []
        offset = 0
        for part in self._parts:
            local = rows[(rows >= offset) & (rows < offset + part.ntotal)] - offset
            if len(local):
                scores, idx = part.search(q, min(k, len(local)), params=self._params(local, k))
                found_s.append(scores)
                found_i.append(np.where(idx < 0, -1, idx + offset))
            offset += part.ntotal
        scores, idx = np.concatenate(found_s, axis=1), np.concatenate(found_i, axis=1)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        scores, idx = np.take_along_axis(scores, order, 1), np.take_along_axis(idx, order, 1)
        return topk_to_run(qids, self._ids, idx, scores)
