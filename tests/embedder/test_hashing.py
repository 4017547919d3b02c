"""The hashing embedder: vectorised, and exactly the vectors of the feature-by-feature loop it
replaced (so every stored hashing result stays what it was)."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from rag_lab.embedder import HashingEmbedder
from rag_lab.tokenizer import EnglishTokenizer, JiebaTokenizer, WhitespaceTokenizer

SAMPLE_DOCS = Path(__file__).parents[2] / "rag_lab" / "sample" / "maintenance_kb" / "docs"


def reference(tokenizer, texts, dimension=1024, char_ngrams=(3, 4)) -> np.ndarray:
    """The 0.x implementation, verbatim in its arithmetic: one CRC-32 per feature, summed with
    ``np.add.at`` into float32, sublinear, L2-normalised."""
    lo, hi = char_ngrams
    out = np.zeros((len(texts), dimension), dtype=np.float32)
    rows, cols, vals = [], [], []
    for i, terms in enumerate(tokenizer(list(texts))):
        feats = list(terms)
        if lo > 0:
            for t in terms:
                padded = f"<{t}>"
                for n in range(lo, hi + 1):
                    feats.extend(padded[j : j + n] for j in range(len(padded) - n + 1))
        hs = np.fromiter((zlib.crc32(f.encode("utf-8")) for f in feats), dtype=np.uint64)
        rows.append(np.full(len(hs), i))
        cols.append((hs % dimension).astype(np.int64))
        vals.append(np.where((hs >> np.uint64(31)) & np.uint64(1), -1.0, 1.0))
    if rows:
        np.add.at(out, (np.concatenate(rows), np.concatenate(cols)), np.concatenate(vals))
    out = np.sign(out) * np.log1p(np.abs(out))
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1.0, norms)


@pytest.fixture(scope="module")
def toy_texts(toy_chunks) -> list[str]:
    return [c.index_text for c in toy_chunks]


@pytest.fixture(scope="module")
def sample_texts() -> list[str]:
    """The sample's Markdown manuals and notes, cut into paragraphs (Chinese and English)."""
    texts = []
    for path in sorted(SAMPLE_DOCS.rglob("*.md")):
        texts += [p for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    assert len(texts) > 100
    return texts


@pytest.mark.parametrize(
    ("dimension", "char_ngrams"), [(1024, (3, 4)), (8, (3, 4)), (64, (0, 0)), (97, (1, 5))]
)
def test_english_vectors_equal_the_reference_bit_for_bit(toy_texts, dimension, char_ngrams):
    tok = EnglishTokenizer()
    got = HashingEmbedder(tok, dimension, char_ngrams).encode_documents(toy_texts)
    want = reference(tok, toy_texts, dimension, char_ngrams)
    assert got.dtype == np.float32 and got.shape == (len(toy_texts), dimension)
    assert np.array_equal(got, want)


def test_chinese_vectors_equal_the_reference_bit_for_bit(sample_texts):
    tok = JiebaTokenizer()
    emb = HashingEmbedder(tok)
    # in two calls: the second meets terms the first did not (the term table grows)
    half = len(sample_texts) // 2
    got = np.concatenate(
        [emb.encode_documents(sample_texts[:half]), emb.encode_queries(sample_texts[half:])]
    )
    want = np.concatenate(
        [reference(tok, sample_texts[:half]), reference(tok, sample_texts[half:])]
    )
    assert np.array_equal(got, want)


def test_a_batch_larger_than_one_numpy_pass(toy_texts):
    tok = WhitespaceTokenizer()
    texts = (toy_texts * 200)[:2500]  # > the 1,024 texts of one pass
    assert np.array_equal(HashingEmbedder(tok).encode_documents(texts), reference(tok, texts))


def test_empty_texts_give_zero_rows_and_the_rest_unit_norm():
    tok = WhitespaceTokenizer()
    emb = HashingEmbedder(tok, dimension=16)
    assert emb.encode_documents([]).shape == (0, 16)
    vecs = emb.encode_documents(["", "pump seal leak", "   ", "pump"])
    assert np.array_equal(vecs[0], np.zeros(16, dtype=np.float32))
    assert np.array_equal(vecs[2], np.zeros(16, dtype=np.float32))
    assert np.allclose(np.linalg.norm(vecs[[1, 3]], axis=1), 1.0)
    assert np.array_equal(vecs, reference(tok, ["", "pump seal leak", "   ", "pump"], 16))


def test_shared_terms_are_closer_than_unrelated_text():
    emb = HashingEmbedder(EnglishTokenizer())
    q, near, far = emb.encode_documents(
        ["hydraulic pump pressure drop", "the pump lost hydraulic pressure", "invoice due date"]
    )
    assert q @ near > 0.3 > q @ far


def test_queries_do_not_grow_the_term_table_and_equal_the_reference(toy_texts):
    emb = HashingEmbedder(JiebaTokenizer())
    emb.encode_documents(toy_texts)
    known = len(emb._table.term_id)
    queries = [f"never seen term{i} zyx{i} 新词{i}" for i in range(200)]
    got = emb.encode_queries(queries)
    assert len(emb._table.term_id) == known  # a server's memory does not grow with its queries
    np.testing.assert_array_equal(got, reference(JiebaTokenizer(), queries))


def test_concurrent_calls_give_the_sequential_vectors(toy_texts):
    """20 threads encoding documents and queries at once (the table grows meanwhile) get exactly
    the vectors one thread gets."""
    from concurrent.futures import ThreadPoolExecutor

    tok = JiebaTokenizer()
    batches = [[f"{t} extra{i} 词{i}" for t in toy_texts] for i in range(40)]
    expected = [reference(tok, b) for b in batches]
    emb = HashingEmbedder(tok)

    def run(i: int) -> np.ndarray:
        encode = emb.encode_documents if i % 2 else emb.encode_queries
        return encode(batches[i])

    with ThreadPoolExecutor(20) as pool:
        got = list(pool.map(run, range(len(batches))))
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)
