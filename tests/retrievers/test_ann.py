"""The dense retriever's index choice: HNSW and IVF parameters reach faiss (read back from the
saved index), IVF trains on a seeded sample, every parameter keys the index stage, and the
defaults build exactly today's flat index."""

from __future__ import annotations

import json

import faiss
import numpy as np
import pytest

from rag_lab.cache import keys
from rag_lab.embedder import HashingEmbedder
from rag_lab.retrievers import DenseRetriever
from rag_lab.tokenizer import EnglishTokenizer
from rag_lab.types import Chunk
from rag_lab.validate import OptionError

WORDS = [f"t{i}" for i in range(400)]


@pytest.fixture(scope="module")
def embedder():
    return HashingEmbedder(tokenizer=EnglishTokenizer(), dimension=64, char_ngrams=(0, 0))


@pytest.fixture(scope="module")
def chunks():
    rng = np.random.default_rng(1)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    picks = rng.choice(len(WORDS), size=(1200, 10), p=p / p.sum())
    return [
        Chunk(f"d{i}#0", f"d{i}", " ".join(WORDS[j] for j in row), 0, 1)
        for i, row in enumerate(picks)
    ]


@pytest.fixture(scope="module")
def queries(chunks):
    return {f"q{i}": " ".join(chunks[i * 53].text.split()[:5]) for i in range(20)}


def saved(retriever: DenseRetriever, tmp_path) -> faiss.Index:
    retriever.save_index(tmp_path)
    return faiss.read_index(str(tmp_path / "index.faiss"))


def test_hnsw_parameters_reach_faiss(embedder, chunks, tmp_path):
    r = DenseRetriever(embedder, index_type="hnsw", hnsw_m=8, ef_construction=64, ef_search=50)
    r.index(chunks)
    index = saved(r, tmp_path)
    assert isinstance(index, faiss.IndexHNSWFlat) and index.ntotal == len(chunks)
    assert index.hnsw.efConstruction == 64 and index.hnsw.efSearch == 50
    assert index.hnsw.nb_neighbors(1) == 8  # M links per node above layer 0 (2*M at layer 0)


def test_hnsw_segments_build_one_graph_each_and_search_as_one(embedder, chunks, queries, tmp_path):
    """1,200 chunks in segments of 500: three graphs (500, 500, 200 rows), each the graph its
    rows alone would get, searched together with ids in corpus order; saved as one file per
    segment and reloaded to the same ranking."""
    seg = DenseRetriever(embedder, index_type="hnsw", hnsw_segment_rows=500, ef_search=200)
    seg.index(chunks)
    seg.save_index(tmp_path)
    assert not (tmp_path / "index.faiss").exists()
    parts = [faiss.read_index(str(tmp_path / f"index.{i}.faiss")) for i in range(3)]
    assert [p.ntotal for p in parts] == [500, 500, 200] and not (
        tmp_path / "index.3.faiss"
    ).exists()
    assert all(p.hnsw.efSearch == 200 for p in parts)
    run = seg.retrieve(queries, 10)
    # the merged ranking is the best 10 of each segment's own graph, ids offset by segment
    alone = DenseRetriever(embedder, index_type="hnsw", ef_search=200)
    alone.index(chunks[1000:])  # the third segment's rows as a corpus of their own
    tail = alone.retrieve(queries, 10)
    for q in queries:
        assert len(run[q]) == 10
        best_tail = {c: s for c, s in tail[q].items() if s >= min(run[q].values())}
        assert best_tail.items() <= run[q].items()
    flat = DenseRetriever(embedder)
    flat.index(chunks)
    f = flat.retrieve(queries, 10)
    assert np.mean([len(set(run[q]) & set(f[q])) / 10 for q in queries]) >= 0.9
    again = DenseRetriever(embedder, index_type="hnsw", hnsw_segment_rows=500, ef_search=200)
    again.load_index(tmp_path)
    assert again.retrieve(queries, 10) == run
    # a segment file lost: refused, not searched short
    (tmp_path / "index.2.faiss").rename(tmp_path / "moved.faiss")
    with pytest.raises(RuntimeError):
        again.load_index(tmp_path)
    (tmp_path / "moved.faiss").rename(tmp_path / "index.2.faiss")
    (tmp_path / "ids.json").write_text(json.dumps(seg.chunk_ids[:-1]))  # ids that do not fit
    with pytest.raises(ValueError, match="holds 1200 vectors for 1199 ids"):
        again.load_index(tmp_path)


def test_a_corpus_within_one_segment_is_one_graph(embedder, chunks, queries, tmp_path):
    one = DenseRetriever(embedder, index_type="hnsw")  # default segment: 20,000 rows
    unsegmented = DenseRetriever(embedder, index_type="hnsw", hnsw_segment_rows=None)
    one.index(chunks)
    unsegmented.index(chunks)
    assert isinstance(saved(one, tmp_path), faiss.IndexHNSWFlat)
    assert one.retrieve(queries, 10) == unsegmented.retrieve(queries, 10)


def test_ivf_trains_on_a_sample_and_caps_nlist(embedder, chunks, queries, tmp_path):
    sampled = DenseRetriever(embedder, index_type="ivf", nlist=64, nprobe=4, train_size=390)
    sampled.index(chunks)
    ivf = faiss.extract_index_ivf(saved(sampled, tmp_path))
    assert ivf.nlist == 10 and ivf.nprobe == 4 and ivf.ntotal == len(chunks)  # 390 // 39
    again = DenseRetriever(embedder, index_type="ivf", nlist=64, nprobe=4, train_size=390)
    again.index(chunks)
    assert again.retrieve(queries, 10) == sampled.retrieve(queries, 10)  # the sample is seeded
    # a sample no smaller than the corpus trains on every vector, as before the option existed
    full = DenseRetriever(embedder, index_type="ivf", nlist=16, nprobe=16, train_size=5000)
    full.index(chunks)
    flat = DenseRetriever(embedder)
    flat.index(chunks)
    a, b = full.retrieve(queries, 10), flat.retrieve(queries, 10)
    for q in queries:  # nprobe == nlist: every list searched, exact (up to tied ids)
        assert sorted(a[q].values()) == pytest.approx(sorted(b[q].values()), abs=1e-6)


@pytest.mark.parametrize("index_type", ["hnsw", "ivf"])
def test_ann_recall_against_flat(embedder, chunks, queries, index_type):
    flat = DenseRetriever(embedder)
    flat.index(chunks)
    ann = DenseRetriever(embedder, index_type=index_type, nlist=16, nprobe=4)
    ann.index(chunks)
    a, f = ann.retrieve(queries, 10), flat.retrieve(queries, 10)
    recall = np.mean([len(set(a[q]) & set(f[q])) / len(f[q]) for q in queries])
    assert recall >= 0.7
    worse = DenseRetriever(embedder, index_type=index_type, nlist=16, nprobe=1, ef_search=1)
    worse.index(chunks)
    w = worse.retrieve(queries, 10)
    assert np.mean([len(set(w[q]) & set(f[q])) / len(f[q]) for q in queries]) < recall


def test_defaults_are_the_exact_flat_index(embedder, chunks, queries, tmp_path):
    r = DenseRetriever(embedder)
    assert (r.index_type, r.store, r.store_dtype) == ("flat", "memory", "float32")
    r.index(chunks)
    assert isinstance(saved(r, tmp_path), faiss.IndexFlatIP)
    docs = embedder.encode_documents([c.index_text for c in chunks])
    q = embedder.encode_queries(list(queries.values()))
    best = np.sort(q @ docs.T, axis=1)[:, ::-1][:, :10]
    run = r.retrieve(queries, 10)
    for i, qid in enumerate(queries):
        assert sorted(run[qid].values(), reverse=True) == pytest.approx(best[i].tolist(), abs=1e-5)


@pytest.mark.parametrize(
    "option, value",
    [
        ("ef_construction", 80),
        ("hnsw_segment_rows", 50000),
        ("train_size", 1000),
        ("store", "memmap"),
        ("store_dtype", "float16"),
    ],
)
def test_every_option_composes_builds_and_keys_the_index_stage(tmp_path, option, value):
    from rag_lab.pipeline.build import build_pipeline
    from tests.compose import TOY_OVERRIDES, compose_evaluate

    def dense_key(overrides: list[str]) -> tuple[str, DenseRetriever]:
        cfg = compose_evaluate([*TOY_OVERRIDES, "retrievers=[dense]", *overrides], tmp_path)
        pipe = build_pipeline(cfg)
        node = pipe.stage_configs["retrievers"]["dense"]
        return keys.index_key(node, None, "chunks"), pipe.retrievers["dense"]

    default_key, default = dense_key([])
    changed_key, changed = dense_key([f"retrievers.dense.{option}={value}"])
    assert getattr(default, option) != value and getattr(changed, option) == value
    assert changed_key != default_key


def test_invalid_ann_options(embedder):
    with pytest.raises(OptionError, match="ef_construction=0: must be >= 1"):
        DenseRetriever(embedder, ef_construction=0)
    with pytest.raises(OptionError, match="hnsw_segment_rows=0: must be >= 1"):
        DenseRetriever(embedder, hnsw_segment_rows=0)
    with pytest.raises(OptionError, match="train_size=10: must be >= 39"):
        DenseRetriever(embedder, train_size=10)


@pytest.mark.parametrize("index_type", ["flat", "hnsw"])
def test_slices_added_into_a_reserved_buffer_match_one_add(index_type):
    from rag_lab.retrievers.dense import _reserve

    vecs = np.random.default_rng(3).standard_normal((3000, 16)).astype(np.float32)

    def make():
        if index_type == "flat":
            return faiss.IndexFlatIP(16)
        return faiss.IndexHNSWFlat(16, 8, faiss.METRIC_INNER_PRODUCT)

    whole, sliced = make(), make()
    whole.add(vecs)
    sliced.add(vecs[:500])  # vectors already held survive the reservation
    _reserve(sliced, 2500)
    flat = faiss.downcast_index(sliced.storage) if index_type == "hnsw" else sliced
    buffer = int(flat.codes.data())
    for start in range(500, 3000, 700):
        sliced.add(vecs[start : start + 700])
    assert int(flat.codes.data()) == buffer  # never re-allocated (it moves without the reserve)
    assert sliced.ntotal == 3000 and flat.codes.size() == 3000 * 16 * 4
    assert np.array_equal(
        faiss.rev_swig_ptr(flat.codes.data(), flat.codes.size()), vecs.view(np.uint8).ravel()
    )
    if index_type == "flat":
        assert np.array_equal(whole.search(vecs[:20], 5)[1], sliced.search(vecs[:20], 5)[1])
