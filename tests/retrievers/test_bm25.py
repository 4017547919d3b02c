"""rag_lab.retrievers.bm25 on the toy corpus: bm25s and rank_bm25 backends, scores by formula."""

from __future__ import annotations

import math

import pytest

from rag_lab.metrics import ranked
from rag_lab.retrievers import BM25Retriever, Retriever
from rag_lab.tokenizer import EnglishTokenizer, JiebaTokenizer


@pytest.fixture(scope="module")
def english():
    return EnglishTokenizer()


@pytest.fixture(scope="module")
def toy_texts(toy_queries):
    return {qid: q.text for qid, q in toy_queries.items()}


def build(chunks, tokenizer, **kwargs) -> BM25Retriever:
    r = BM25Retriever(tokenizer, **kwargs)
    r.index(chunks)
    return r


def top1(scores):
    return ranked(scores)[0] if scores else None


def test_bm25s_ranks_the_right_doc_first(toy_chunks, english):
    r = build(toy_chunks, english)
    assert isinstance(r, Retriever)
    run = r.retrieve({"q": "E102 hydraulic oil hot"}, k=5)
    assert top1(run["q"]) == "d1#0"
    assert run["q"]["d1#0"] > run["q"]["d3#0"] > 0  # d3 shares only "E102"
    assert set(r.stats) >= {"tokenize_seconds", "index_seconds", "chunks_per_second"}


@pytest.mark.parametrize("method", ["lucene", "robertson"])
def test_backends_agree_on_top1_for_every_toy_query(toy_chunks, toy_texts, english, method):
    run_s = build(toy_chunks, english, backend="bm25s", method=method).retrieve(toy_texts, k=8)
    run_r = build(toy_chunks, english, backend="rank_bm25").retrieve(toy_texts, k=8)
    assert set(run_s) == set(run_r) == set(toy_texts)
    assert {q: top1(run_s[q]) for q in toy_texts} == {q: top1(run_r[q]) for q in toy_texts}
    assert {q: set(run_s[q]) for q in toy_texts} == {
        q: set(run_r[q]) for q in toy_texts
    }  # same matches
    assert sum(1 for q in toy_texts if run_s[q]) >= 7


def test_robertson_equals_rank_bm25_up_to_the_constant_k1_plus_1(toy_chunks, toy_texts, english):
    """rank_bm25's BM25Okapi and bm25s' robertson share idf = ln((N - df + 0.5) / (df + 0.5));
    rank_bm25 floors negative idf (df > N/2), so the check needs every query term below that,
    which holds here. bm25s drops the constant (k1 + 1) from the tf part, as Lucene does, so
    scores differ by that factor."""
    k1, b = 1.2, 0.6
    doc_tokens = english([c.index_text for c in toy_chunks])
    n = len(doc_tokens)
    for q_tokens in english(list(toy_texts.values())):
        for t in q_tokens:
            assert sum(t in d for d in doc_tokens) < n / 2
    run_s = build(toy_chunks, english, method="robertson", k1=k1, b=b).retrieve(toy_texts, k=8)
    run_r = build(toy_chunks, english, backend="rank_bm25", k1=k1, b=b).retrieve(toy_texts, k=8)
    for q in toy_texts:
        assert set(run_s[q]) == set(run_r[q])
        for cid, s in run_s[q].items():
            assert s * (k1 + 1) == pytest.approx(run_r[q][cid], rel=1e-5)


def test_bm25s_lucene_score_by_hand(toy_chunks, english):
    """Lucene BM25: idf = ln(1 + (N - df + 0.5) / (df + 0.5)), tf part
    tf / (tf + k1 (1 - b + b dl / avgdl))
    (Lucene >= 8 and bm25s omit the constant factor (k1 + 1), which does not change the ranking).
    Computed on the retriever's own tokens: the tokenizer output of each chunk's index_text."""
    k1, b = 1.3, 0.7
    query = "hydraulic pressure too low"
    r = build(toy_chunks, english, k1=k1, b=b)
    docs = english([c.index_text for c in toy_chunks])
    (q_terms,) = english([query])
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)

    def lucene(doc):
        total = 0.0
        for t in q_terms:
            df, tf = sum(t in d for d in docs), doc.count(t)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            total += idf * tf / (tf + k1 * (1 - b + b * len(doc) / avgdl))
        return total

    run = r.retrieve({"q": query}, k=n)["q"]
    expected = {
        c.chunk_id: lucene(d) for c, d in zip(toy_chunks, docs, strict=True) if lucene(d) > 0
    }
    assert set(run) == set(expected) == {"d1#0", "d2#0"}
    for cid, s in expected.items():
        assert run[cid] == pytest.approx(s, abs=1e-5)


def test_query_with_no_known_term_returns_empty_run(toy_chunks, english):
    for backend in ("bm25s", "rank_bm25"):
        r = build(toy_chunks, english, backend=backend)
        run = r.retrieve(
            {"unknown": "zebra quartz xylophone", "stop": "the and of", "ok": "oil"}, k=5
        )
        assert run["unknown"] == {} and run["stop"] == {}, backend
        assert list(run["ok"]) == ["d1#0"], backend  # only the one matching chunk, not k


def test_k_limits_results(toy_chunks, english):
    r = build(toy_chunks, english)
    run = r.retrieve({"q": "fault E102 HX-200 check"}, k=2)
    assert len(run["q"]) == 2
    full = r.retrieve({"q": "fault E102 HX-200 check"}, k=100)
    assert ranked(full["q"])[:2] == ranked(run["q"])
    assert len(full["q"]) <= len(toy_chunks)


def test_jieba_tokenizer_finds_chinese_docs(toy_chunks, toy_texts):
    run = build(toy_chunks, JiebaTokenizer()).retrieve({q: toy_texts[q] for q in ("q4", "q5")}, k=3)
    assert top1(run["q4"]) == "d5#0"
    assert top1(run["q5"]) == "d6#0"


def test_invalid_backend():
    with pytest.raises(ValueError, match="backend"):
        BM25Retriever(EnglishTokenizer(), backend="lucene")


def test_bm25s_empty_query_batch(toy_chunks, english):
    assert build(toy_chunks, english, backend="rank_bm25").retrieve({}, k=5) == {}
    assert build(toy_chunks, english).retrieve({}, k=5) == {}


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_idf_per_distinct_frequency_equals_bm25s_per_term(method):
    """``_idf_array`` calls the idf scorer once per distinct document frequency: the very
    float32 values of bm25s' per-term loop (an index built either way scores the same)."""
    import numpy as np
    from bm25s import scoring

    from rag_lab.retrievers.bm25 import _idf_array

    rng = np.random.default_rng(0)
    df = rng.zipf(1.5, 20000).clip(0, 5000)
    df[:7] = 0  # terms no chunk holds any more
    idf_of = scoring._select_idf_scorer(method)
    want = scoring._build_idf_array(dict(enumerate(df.tolist())), 5183, idf_of, dtype="float32")
    got = _idf_array(df, 5183, idf_of, "float32")
    assert got.dtype == want.dtype and np.array_equal(got, want)
