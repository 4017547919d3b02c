"""rag_lab.embedder.store and DenseRetriever(store=memmap): a matrix streamed to disk block by
block ranks exactly as the in-memory one (float32), float16 stays within rounding, the encode
never holds more than one block, and the matrix is cached, reused, and rebuilt when damaged."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lab.cache import StageCache
from rag_lab.embedder import HashingEmbedder
from rag_lab.embedder.store import (
    FILE_NAMES,
    MemmapWriter,
    flat_header,
    flat_index_file,
    float32_slices,
    open_matrix,
    sample_rows,
)
from rag_lab.retrievers import DenseRetriever
from rag_lab.retrievers import dense as dense_module
from rag_lab.tokenizer import EnglishTokenizer
from rag_lab.types import Chunk
from rag_lab.validate import OptionError

WORDS = [f"w{i}" for i in range(300)]


def synthetic(n: int, seed: int = 0) -> list[Chunk]:
    """``n`` chunks of 12 Zipf-distributed words each (deterministic)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    picks = rng.choice(len(WORDS), size=(n, 12), p=p / p.sum())
    texts = [" ".join(WORDS[j] for j in row) for row in picks]
    return [Chunk(f"d{i}#0", f"d{i}", t, 0, len(t)) for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def embedder():
    return HashingEmbedder(tokenizer=EnglishTokenizer(), dimension=128)


@pytest.fixture(scope="module")
def chunks():
    return synthetic(700)


@pytest.fixture(scope="module")
def queries(chunks):
    return {f"q{i}": " ".join(chunks[i * 37].text.split()[:6]) for i in range(15)}


def test_writer_round_trips_block_by_block(tmp_path):
    rows = np.arange(12, dtype=np.float32).reshape(6, 2) / 7
    w = MemmapWriter(tmp_path, 6, 2, "float32")
    w.write(rows[:4])
    w.write(rows[4:])
    w.close()
    back = open_matrix(tmp_path, 6, 2, "float32")
    assert isinstance(back, np.memmap) and not back.flags.writeable
    assert np.array_equal(back, rows)
    assert [s.tolist() for s in float32_slices(back, rows=4)] == [
        rows[:4].tolist(),
        rows[4:].tolist(),
    ]
    (tmp_path / "h").mkdir()
    half = MemmapWriter(tmp_path / "h", 6, 2, "float16")
    half.write(rows)
    half.close()
    h = open_matrix(tmp_path / "h", 6, 2, "float16")
    half_bytes = (tmp_path / "h" / FILE_NAMES["float16"]).stat().st_size - h.offset
    assert h.dtype == np.float16 and 2 * half_bytes == back.nbytes == 48
    assert np.allclose(h.astype(np.float32), rows, atol=1e-3) and not np.array_equal(h, rows)


def test_writer_refuses_overflow_and_short_matrices(tmp_path):
    w = MemmapWriter(tmp_path, 3, 2, "float32")
    with pytest.raises(ValueError, match="4 rows written into a matrix of 3"):
        w.write(np.zeros((4, 2)))
    w.write(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="2 of 3 rows written"):
        w.close()
    with pytest.raises(ValueError, match="not \\(3, 4\\) float32"):
        open_matrix(tmp_path, 3, 4, "float32")


@pytest.mark.parametrize(("rows", "dimension"), [(0, 4), (2, 4), (7, 129)])
def test_a_float32_matrix_file_is_the_faiss_flat_index_file(tmp_path, rows, dimension):
    """Byte for byte what faiss writes for an IndexFlatIP of those rows, and read back by faiss
    memory-mapped, not copied."""
    faiss = pytest.importorskip("faiss")
    vecs = np.random.default_rng(rows).standard_normal((rows, dimension), dtype=np.float32)
    index = faiss.IndexFlatIP(dimension)
    index.add(vecs)
    written = faiss.serialize_index(index).tobytes()
    assert written == flat_header(rows, dimension) + vecs.tobytes()
    if not rows:
        return
    w = MemmapWriter(tmp_path, rows, dimension, "float32")
    w.write(vecs)
    w.close()
    assert (tmp_path / FILE_NAMES["float32"]).read_bytes() == written
    path = flat_index_file(open_matrix(tmp_path, rows, dimension, "float32"))
    mapped = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
    assert not faiss.downcast_index(mapped).codes.is_owned
    q = vecs[:2] + 0.5
    assert [a.tolist() for a in mapped.search(q, 3)] == [a.tolist() for a in index.search(q, 3)]


def test_only_a_whole_stored_float32_matrix_is_searched_in_place(tmp_path):
    rows = np.ones((6, 2), dtype=np.float32)
    for dtype in ("float32", "float16"):
        (tmp_path / dtype).mkdir()
        w = MemmapWriter(tmp_path / dtype, 6, 2, dtype)
        w.write(rows)
        w.close()
    whole = open_matrix(tmp_path / "float32", 6, 2, "float32")
    assert flat_index_file(whole) == tmp_path / "float32" / FILE_NAMES["float32"]
    assert flat_index_file(whole[:3]) is None and flat_index_file(whole[:, :1]) is None
    assert flat_index_file(open_matrix(tmp_path / "float16", 6, 2, "float16")) is None
    assert flat_index_file(np.asarray(whole)) is None


def test_a_forged_flat_header_is_refused_naming_the_file(tmp_path):
    path = tmp_path / FILE_NAMES["float32"]
    path.write_bytes(flat_header(1000, 2) + bytes(16))  # claims 1000 rows, holds 2
    with pytest.raises(ValueError, match=r"vectors\.faiss: its header and size do not describe"):
        open_matrix(tmp_path, 1000, 2, "float32")
    path.write_bytes(b"\x93NUMPY" + bytes(60))
    with pytest.raises(ValueError, match="not a faiss flat inner-product index file"):
        open_matrix(tmp_path, 2, 2, "float32")


def test_sample_rows_is_seeded_uniform_and_all_rows_when_small():
    m = np.arange(1000, dtype=np.float16).reshape(500, 2)
    a, b = sample_rows(m, 100), sample_rows(m, 100)
    assert a.dtype == np.float32 and a.shape == (100, 2) and np.array_equal(a, b)
    firsts = a[:, 0]
    assert len(set(firsts.tolist())) == 100 and np.all(np.diff(firsts) > 0)  # distinct, in order
    assert firsts.min() < 200 and firsts.max() > 800  # spread over the matrix, not its head
    assert np.array_equal(sample_rows(m, 500), m.astype(np.float32))


def test_invalid_store_options(embedder):
    with pytest.raises(OptionError, match="store='disk': must be one of memory, memmap"):
        DenseRetriever(embedder, store="disk")
    with pytest.raises(OptionError, match="store_dtype='int8'"):
        DenseRetriever(embedder, store_dtype="int8")


@pytest.mark.parametrize("index_type", ["flat", "ivf"])
def test_memmap_float32_ranks_exactly_as_memory(embedder, chunks, queries, index_type):
    opts = {"index_type": index_type, "nlist": 8, "nprobe": 3}
    mem = DenseRetriever(embedder, **opts)
    mem.index(chunks)
    mm = DenseRetriever(embedder, store="memmap", **opts)
    mm.index(chunks)
    assert mm.retrieve(queries, 10) == mem.retrieve(queries, 10)


def test_float16_store_stays_within_rounding(embedder, chunks, queries):
    mem = DenseRetriever(embedder)
    mem.index(chunks)
    half = DenseRetriever(embedder, store="memmap", store_dtype="float16")
    half.index(chunks)
    a, b = mem.retrieve(queries, 10), half.retrieve(queries, 10)
    overlap = np.mean([len(set(a[q]) & set(b[q])) / 10 for q in queries])
    assert overlap >= 0.9
    for q in queries:
        assert sorted(b[q].values(), reverse=True) == pytest.approx(
            sorted(a[q].values(), reverse=True), abs=2e-3
        )


class Recording:
    """The embedder, recording the size of every encode_documents call."""

    def __init__(self, inner: HashingEmbedder) -> None:
        self.inner, self.dimension, self.calls = inner, inner.dimension, []

    @property
    def identity(self) -> dict:
        return self.inner.identity

    def encode_queries(self, texts):
        return self.inner.encode_queries(texts)

    def encode_documents(self, texts):
        self.calls.append(len(texts))
        return self.inner.encode_documents(texts)


def test_memmap_encodes_block_by_block_and_leaves_no_temporary(
    embedder, chunks, queries, monkeypatch, tmp_path
):
    monkeypatch.setattr(dense_module, "ENCODE_BLOCK", 128)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    rec = Recording(embedder)
    mm = DenseRetriever(rec, store="memmap")
    mm.index(chunks)
    assert max(rec.calls) <= 128 and sum(rec.calls) == len(chunks)
    assert list(tmp_path.iterdir()) == []  # the matrix of an uncached run is removed
    ref = DenseRetriever(embedder)
    ref.index(chunks)
    assert mm.retrieve(queries, 10) == ref.retrieve(queries, 10)  # searched in the unlinked file


def test_a_flat_index_over_the_stored_matrix_is_the_file_and_exports(
    embedder, chunks, queries, tmp_path
):
    faiss = pytest.importorskip("faiss")
    mm = DenseRetriever(embedder, store="memmap")
    mm.attach_cache(StageCache(tmp_path / "cache").view("embeddings"))
    mm.index(chunks)
    assert not faiss.downcast_index(mm._parts[0]).codes.is_owned  # mapped, not copied
    mem = DenseRetriever(embedder)
    mem.index(chunks)
    assert faiss.downcast_index(mem._parts[0]).codes.is_owned
    (tmp_path / "export").mkdir()
    mm.save_index(tmp_path / "export")  # a copy of its own: the cache may be cleared
    back = DenseRetriever(embedder, store="memmap")
    back.load_index(tmp_path / "export")
    assert back.retrieve(queries, 10) == mem.retrieve(queries, 10)


def test_memmap_matrix_is_cached_reused_and_rebuilt_when_damaged(
    embedder, chunks, queries, tmp_path
):
    cache = StageCache(tmp_path)
    first = DenseRetriever(embedder, store="memmap")
    first.attach_cache(cache.view("embeddings"))
    first.index(chunks)
    assert first.stats["embedded_chunks"] == len(chunks)
    files = list((tmp_path / "embeddings").glob(f"*/*/{FILE_NAMES['float32']}"))
    assert len(files) == 1
    again = DenseRetriever(embedder, store="memmap", index_type="ivf", nlist=8)
    again.attach_cache(cache.view("embeddings"))
    again.index(chunks)  # another index type: the same matrix, nothing encoded
    assert again.stats["embedded_chunks"] == 0
    # truncated, as a new file: the cache replaces entries, never rewrites one in place (the
    # flat index of ``first`` searches the file it mapped, and a file shrunk under a mapping
    # would fault it)
    damaged = files[0].with_name("damaged")
    damaged.write_bytes(files[0].read_bytes()[:200])
    damaged.replace(files[0])
    third = DenseRetriever(embedder, store="memmap")
    third.attach_cache(cache.view("embeddings"))
    third.index(chunks)  # rebuilt from the per-text table: still nothing encoded
    assert third.stats["embedded_chunks"] == 0
    assert open_matrix(files[0].parent, len(chunks), 128, "float32").shape == (len(chunks), 128)
    assert third.retrieve(queries, 10) == first.retrieve(queries, 10)


class FailsAfter(Recording):
    """Raises on its ``calls``-th document encode, as a killed GPU or a Ctrl-C would."""

    def __init__(self, inner, calls: int):
        super().__init__(inner)
        self.limit = calls

    def encode_documents(self, texts):
        if len(self.calls) + 1 == self.limit:
            raise KeyboardInterrupt
        return super().encode_documents(texts)


@pytest.mark.parametrize("store", ["memory", "memmap"])
def test_vectors_reach_the_table_in_few_transactions_and_an_interrupted_encode_keeps_them(
    embedder, chunks, monkeypatch, tmp_path, store
):
    """700 texts in blocks of 100, written at most 300 rows per transaction: three writes, not
    seven; an encode stopped at its fifth block still leaves the first four blocks in the table,
    and the rerun encodes only the other 300."""
    monkeypatch.setattr(dense_module, "ENCODE_BLOCK", 100)
    monkeypatch.setattr(dense_module, "FLUSH_ROWS", 300)
    cache = StageCache(tmp_path / "cache")
    writes = []
    put = cache.put_many
    monkeypatch.setattr(cache, "put_many", lambda *a: writes.append(len(a[2])) or put(*a))
    whole = DenseRetriever(embedder, store=store)
    whole.attach_cache(cache.view("embeddings"))
    whole.index(chunks)
    assert writes == [300, 300, 100]
    stopped = StageCache(tmp_path / "stopped")
    first = DenseRetriever(FailsAfter(embedder, calls=5), store=store)
    first.attach_cache(stopped.view("embeddings"))
    with pytest.raises(KeyboardInterrupt):
        first.index(chunks)
    rec = Recording(embedder)
    again = DenseRetriever(rec, store=store)
    again.attach_cache(stopped.view("embeddings"))
    again.index(chunks)
    assert sum(rec.calls) == 300 and again.stats["embedded_chunks"] == 300
    assert again.retrieve({"q": chunks[3].text}, 5) == whole.retrieve({"q": chunks[3].text}, 5)
