"""CrossEncoderReranker as a pipeline stage, with a tiny randomly initialised BERT cross-encoder
built in a temporary folder (quality is not tested; the contract and the caching are): only the
head is re-scored, the tail keeps its order, ties follow the one rule, pair scores live in the
stage cache's ``rerank_scores`` namespace and a rerun re-scores nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rag_lab.cache import StageCache
from rag_lab.evaluate import evaluate
from rag_lab.ranking import ranked
from rag_lab.reranker import CrossEncoderReranker
from rag_lab.reranker.cross_encoder import interpolate
from rag_lab.types import Chunk
from tests.compose import TOY, TOY_OVERRIDES, compose_evaluate

torch = pytest.importorskip("torch")

WORDS = "pump oil pressure fault e102 hydraulic filter air compressor spindle grease hours".split()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny_ce")
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tok = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True)
    cfg = BertConfig(
        vocab_size=len(WORDS) + 5,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        num_labels=1,
    )
    torch.manual_seed(0)
    BertForSequenceClassification(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def toy_run(n: int = 8) -> tuple[dict[str, Chunk], dict[str, dict[str, float]]]:
    texts = [" ".join(WORDS[i % len(WORDS) :][:4]) for i in range(n)]
    chunks = {f"d{i}#0": Chunk(f"d{i}#0", f"d{i}", t, 0, len(t)) for i, t in enumerate(texts)}
    return chunks, {"q": {f"d{i}#0": float(n - i) for i in range(n)}}


def test_head_is_reranked_tail_keeps_order_and_ties_follow_ids(tiny):
    chunks, run = toy_run()
    rr = CrossEncoderReranker(tiny, depth=4, interpolation=1.0)
    out = rr.process({"q": "oil pressure fault"}, run, chunks)
    order = ranked(out["q"])
    assert set(order[:4]) == {f"d{i}#0" for i in range(4)} and order[4:] == [
        f"d{i}#0" for i in range(4, 8)
    ]
    raw = rr.score([("oil pressure fault", chunks[c].text) for c in [f"d{i}#0" for i in range(4)]])
    assert order[:4] == [f"d{i}#0" for i in np.lexsort((np.arange(4), -raw))]
    assert rr.process({"q": "x"}, run, chunks) == rr.rerank({"q": "x"}, run, chunks)
    # tied first-stage scores: the head is cut and the tail ordered by ascending id
    tied = {"q": {c: 1.0 for c in reversed(list(chunks))}}
    cut = CrossEncoderReranker(tiny, depth=2, interpolation=0.0).rerank({"q": "x"}, tied, chunks)
    assert ranked(cut["q"]) == sorted(chunks)
    assert CrossEncoderReranker(tiny, depth=0).rerank({"q": "x"}, run, chunks) == run


def test_interpolation_by_formula():
    first, ce = np.array([3.0, 2.0, 1.0]), np.array([0.0, 10.0, 5.0])
    np.testing.assert_allclose(
        interpolate(first, ce, 0.25),
        0.25 * np.array([0.0, 1.0, 0.5]) + 0.75 * np.array([1.0, 0.5, 0.0]),
    )
    np.testing.assert_allclose(interpolate(np.ones(3), ce, 0.0), np.ones(3))  # constant → ones


def test_scores_live_in_the_rerank_scores_namespace(tiny, tmp_path):
    chunks, run = toy_run()
    cache = StageCache(tmp_path)
    rr = CrossEncoderReranker(tiny, depth=6)
    rr.attach_cache(cache.view("rerank_scores"))
    first = rr.rerank({"q": "pump"}, run, chunks)
    again = CrossEncoderReranker(tiny, depth=6)
    again.attach_cache(cache.view("rerank_scores"))
    assert again.rerank({"q": "pump"}, run, chunks) == first
    assert again.stats["pairs_cached"] == 6 and again.stats["pairs_scored"] == 0
    assert (tmp_path / "rerank_scores").is_dir()


def test_in_the_pipeline_reranker_then_postprocess_and_cached_across_runs(tiny, tmp_path):
    overrides = [
        *TOY_OVERRIDES,
        "retrievers=[dense,bm25]",
        "tracking=none",
        f"cache.dir={tmp_path / 'cache'}",
        "reranker=cross_encoder",
        f"reranker.model={tiny}",
        "reranker.depth=5",
        "reranker.max_length=64",
        "postprocess=[cross_encoder]",
        f"postprocess.cross_encoder.model={tiny}",
        "postprocess.cross_encoder.depth=3",
    ]
    cold = evaluate(compose_evaluate(overrides, tmp_path / "a"))
    warm = evaluate(compose_evaluate(overrides, tmp_path / "b"))
    n_queries = len((TOY / "queries.jsonl").read_text().splitlines())
    assert cold["cache/rerank_scores/misses"] > 0 and warm["cache/rerank_scores/misses"] == 0
    assert (
        warm["cache/rerank_scores/hits"]
        == cold["cache/rerank_scores/misses"] + cold["cache/rerank_scores/hits"]
    )
    assert warm["reranker/pairs_scored"] == 0 and warm["cross_encoder/pairs_scored"] == 0
    assert cold["reranker/pairs_scored"] <= 5 * n_queries
    assert warm["ndcg_at_10"] == cold["ndcg_at_10"]
    table = json.loads((tmp_path / "a" / "run" / "metrics.json").read_text())
    assert table["ndcg_at_10"] == cold["ndcg_at_10"]
