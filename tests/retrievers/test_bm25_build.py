"""The bm25s index rag_lab builds (term counts in blocks, scores over whole arrays) is the very
score matrix bm25s' own ``index`` builds from the same tokens, for every scoring method, in
both languages, across tokenising blocks, with chunks that have no terms; and its top k are
bm25s' own scores, ties at the cut in chunk order."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest

from rag_lab.retrievers import BM25Retriever, bm25
from rag_lab.retrievers.bm25 import BM25S_METHODS
from rag_lab.tokenizer import EnglishTokenizer, JiebaTokenizer
from rag_lab.types import Chunk


def columns(engine) -> dict[str, tuple[bytes, bytes]]:
    """Each term's column of the score matrix: (chunk rows, scores) as bytes."""
    s = engine.scores
    n_cols = len(s["indptr"]) - 1
    out = {}
    for term, col in engine.vocab_dict.items():
        if col < n_cols:
            lo, hi = s["indptr"][col], s["indptr"][col + 1]
            out[term] = (s["indices"][lo:hi].tobytes(), s["data"][lo:hi].tobytes())
        else:  # the empty token bm25s adds past the matrix
            out[term] = (b"", b"")
    return out


@pytest.fixture(scope="module")
def corpus(toy_chunks):
    """The toy chunks, 1,500 chunks re-drawn from their words (Zipf), and two chunks with no
    terms at all."""
    words = sorted({w for c in toy_chunks for w in c.text.split()})
    rng = np.random.default_rng(5)
    p = 1.0 / np.arange(1, len(words) + 1)
    drawn = [
        " ".join(words[j] for j in rng.choice(len(words), rng.integers(3, 40), p=p / p.sum()))
        for _ in range(1500)
    ]
    texts = [c.text for c in toy_chunks] + drawn + ["", "... !"]
    return [Chunk(f"c{i}", f"d{i}", t, 0, len(t)) for i, t in enumerate(texts)]


@pytest.mark.parametrize("method", BM25S_METHODS)
@pytest.mark.parametrize("tokenizer", [EnglishTokenizer(), JiebaTokenizer()], ids=["en", "zh"])
def test_the_matrix_is_bm25s_own(corpus, toy_queries, method, tokenizer, monkeypatch):
    monkeypatch.setattr(bm25, "TOKENIZE_BLOCK", 400)  # four blocks
    ours = BM25Retriever(tokenizer, method=method, k1=1.2, b=0.6)
    ours.index(corpus)
    ref = bm25s.BM25(k1=1.2, b=0.6, method=method)
    ref.index(tokenizer([c.index_text for c in corpus]), show_progress=False)
    assert columns(ours._engine) == columns(ref)
    assert ours._engine.scores["num_docs"] == ref.scores["num_docs"] == len(corpus)
    if method in ("bm25l", "bm25+"):
        by_term = {t: ref.nonoccurrence_array[i] for t, i in ref.vocab_dict.items() if t}
        mine = ours._engine.nonoccurrence_array
        assert all(mine[ours._engine.vocab_dict[t]] == v for t, v in by_term.items())
    texts = {qid: q.text for qid, q in toy_queries.items()}
    run = ours.retrieve(texts, 10)
    for qid, tokens in zip(texts, tokenizer(list(texts.values()))):
        # the ten best of bm25s' own scores; a tie at the cut goes to the earlier chunks
        scores = ref.get_scores(tokens) if tokens else np.zeros(len(corpus), np.float32)
        best = np.lexsort((np.arange(len(corpus)), -scores))[:10]
        expected = {corpus[i].chunk_id: float(scores[i]) for i in best if scores[i] > 0}
        assert run[qid] == expected
        _, their = ref.retrieve([tokens], k=10, show_progress=False)
        assert sorted(run[qid].values()) == sorted(float(x) for x in their[0] if x > 0)
