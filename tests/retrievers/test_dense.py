"""rag_lab.retrievers.dense with the HashingEmbedder on the toy corpus: faiss flat against brute
force, ANN index types against flat, and the embedder's determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rag_lab.embedder import Embedder, HashingEmbedder
from rag_lab.metrics import ranked
from rag_lab.retrievers import DenseRetriever
from rag_lab.tokenizer import EnglishTokenizer


@pytest.fixture(scope="module")
def embedder():
    return HashingEmbedder(tokenizer=EnglishTokenizer())


@pytest.fixture(scope="module")
def toy_texts(toy_queries):
    return {qid: q.text for qid, q in toy_queries.items()}


def build(chunks, embedder, **kwargs) -> DenseRetriever:
    r = DenseRetriever(embedder, **kwargs)
    r.index(chunks)
    return r


def test_flat_top1_equals_brute_force(toy_chunks, toy_texts, embedder):
    run = build(toy_chunks, embedder).retrieve(toy_texts, k=5)
    docs = embedder.encode_documents([c.index_text for c in toy_chunks])
    queries = embedder.encode_queries(list(toy_texts.values()))
    sims = queries @ docs.T
    for qi, qid in enumerate(toy_texts):
        assert len(run[qid]) == 5
        assert ranked(run[qid])[0] == toy_chunks[int(np.argmax(sims[qi]))].chunk_id
        for cid, s in run[qid].items():  # scores are the inner products
            assert s == pytest.approx(
                float(sims[qi][[c.chunk_id for c in toy_chunks].index(cid)]), abs=1e-5
            )
        # the k best by brute force (by score; near-ties may swap ids)
        assert sorted(run[qid].values(), reverse=True) == pytest.approx(
            sorted(sims[qi], reverse=True)[:5], abs=1e-5
        )


def test_flat_finds_the_relevant_toy_doc(toy_chunks, toy_texts, embedder):
    run = build(toy_chunks, embedder).retrieve(toy_texts, k=3)
    assert ranked(run["q3"])[0] == "d4#0"
    assert ranked(run["q9"])[0] == "d8#0"


@pytest.mark.parametrize("index_type", ["hnsw", "ivf"])
def test_ann_index_types_return_k_and_agree_with_flat(toy_chunks, toy_texts, embedder, index_type):
    flat = build(toy_chunks, embedder).retrieve(toy_texts, k=5)
    ann = build(toy_chunks, embedder, index_type=index_type, nlist=4, nprobe=4).retrieve(
        toy_texts, k=5
    )
    assert set(ann) == set(flat)
    assert all(len(ann[q]) == 5 for q in toy_texts)
    top1_agree = sum(ranked(ann[q])[0] == ranked(flat[q])[0] for q in toy_texts)
    assert top1_agree >= len(toy_texts) - 1
    overlap = np.mean([len(set(ann[q]) & set(flat[q])) / 5 for q in toy_texts])
    assert overlap >= 0.8


def test_k_larger_than_corpus(toy_chunks, embedder):
    run = build(toy_chunks, embedder).retrieve({"q": "oil"}, k=100)
    assert len(run["q"]) == len(toy_chunks)
    assert build(toy_chunks, embedder).retrieve({}, k=5) == {}


def test_invalid_index_type(embedder):
    with pytest.raises(ValueError, match="index_type"):
        DenseRetriever(embedder, index_type="pq")


def test_embeddings_are_l2_normalised(embedder):
    assert isinstance(embedder, Embedder)
    vecs = embedder.encode_documents(["Hydraulic oil too hot", "E102", "主轴温度 60 °C", "the"])
    assert vecs.dtype == np.float32 and vecs.shape == (4, embedder.dimension)
    norms = np.linalg.norm(vecs, axis=1)
    assert norms[:3] == pytest.approx(1.0, abs=1e-6)
    assert norms[3] == 0.0  # only a stopword: no features, a zero vector (not NaN)
    assert np.array_equal(embedder.encode_queries(["E102"]), vecs[1:2])  # same encoding both sides
    # texts that share terms are closer than texts that do not
    a, b, c = embedder.encode_documents(
        ["hydraulic oil too hot", "the oil is too hot", "PLC battery"]
    )
    assert a @ b > a @ c


PROBE = """
import json, sys
from rag_lab.embedder import HashingEmbedder
from rag_lab.tokenizer import EnglishTokenizer
emb = HashingEmbedder(tokenizer=EnglishTokenizer(), dimension=64)
v = emb.encode_documents(json.loads(sys.argv[1]))
print(json.dumps({"salt": hash("salt-probe"), "vecs": v.tolist()}))
"""


def test_embeddings_deterministic_across_instances_and_processes():
    texts = [
        "Fault E102 means the hydraulic oil is too hot",
        "SP-45 主轴温度超过 60 °C 时报警 E120",
    ]
    here = HashingEmbedder(tokenizer=EnglishTokenizer(), dimension=64).encode_documents(texts)
    again = HashingEmbedder(tokenizer=EnglishTokenizer(), dimension=64).encode_documents(texts)
    assert np.array_equal(here, again)
    seed = "1" if os.environ.get("PYTHONHASHSEED") == "2" else "2"
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(texts)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": seed},
    )
    other = json.loads(out.stdout.strip().splitlines()[-1])
    assert other["salt"] != hash("salt-probe")  # the other process really has another str-hash salt
    assert np.array_equal(np.asarray(other["vecs"], dtype=np.float32), here)


def test_identity_names_what_defines_the_vectors(embedder):
    assert embedder.identity == {
        "kind": "hashing",
        "dimension": 1024,
        "char_ngrams": [3, 4],
        "tokenizer": "EnglishTokenizer",
    }
    no_ngrams = HashingEmbedder(tokenizer=EnglishTokenizer(), char_ngrams=(0, 0))
    assert not np.array_equal(
        no_ngrams.encode_documents(["pumps"]), embedder.encode_documents(["pumps"])
    )


@pytest.mark.parametrize("mapped", [False, True])
def test_stored_rows_are_the_flat_index_vectors(tmp_path, mapped):
    """An update reads the old vectors as a view of the flat index's storage (a memory-mapped
    index file too): the rows ``reconstruct_n`` copies."""
    import faiss

    from rag_lab.retrievers.dense import _stored_rows

    vecs = np.random.default_rng(1).standard_normal((37, 16)).astype(np.float32)
    index = faiss.IndexFlatIP(16)
    index.add(vecs)
    if mapped:
        faiss.write_index(index, str(tmp_path / "index.faiss"))
        index = faiss.read_index(str(tmp_path / "index.faiss"), faiss.IO_FLAG_MMAP_IFC)
    rows = _stored_rows(index)
    assert rows.dtype == np.float32 and rows.shape == (37, 16)
    assert np.array_equal(rows, index.reconstruct_n(0, 37)) and np.array_equal(rows, vecs)
