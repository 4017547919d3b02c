"""``reranker.backend=onnx``: the exported cross-encoder scores what torch scores (fp32), int8
keeps the order close, the reranked run is the same, and the score cache keys on the backend."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lab.cache import StageCache
from rag_lab.cache.keys import model_table
from rag_lab.ranking import ranked
from rag_lab.reranker import CrossEncoderReranker
from rag_lab.types import Chunk
from rag_lab.validate import OptionError

pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

WORDS = "pump oil pressure fault e102 hydraulic filter air compressor spindle grease hours".split()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny_ce_onnx")
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True).save_pretrained(folder)
    cfg = BertConfig(
        vocab_size=len(WORDS) + 5,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
    )
    torch.manual_seed(0)
    BertForSequenceClassification(cfg).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module", autouse=True)
def home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAG_LAB_HOME", str(tmp_path_factory.mktemp("rag_lab_home")))
        yield


def pairs(n: int = 24) -> list[tuple[str, str]]:
    rng = np.random.default_rng(0)
    return [
        (" ".join(rng.choice(WORDS, 3)), " ".join(rng.choice(WORDS, int(rng.integers(1, 30)))))
        for _ in range(n)
    ]


def test_onnx_scores_are_torch_scores(tiny):
    p = pairs()
    ref = CrossEncoderReranker(tiny, batch_size=5).score(p)
    fp32 = CrossEncoderReranker(tiny, batch_size=5, backend="onnx").score(p)
    np.testing.assert_allclose(fp32, ref, atol=1e-5)
    int8 = CrossEncoderReranker(tiny, batch_size=5, backend="onnx", quantize="int8").score(p)
    # a random tiny model's scores hardly spread (~1e-4): int8 is checked for being close in
    # value here; its ranking quality on a real model is benchmarks/bench_encoders.py's
    assert int8.shape == ref.shape and np.abs(int8 - ref).max() < 0.01


def test_rerank_is_the_same_and_scores_cache_apart(tiny, tmp_path):
    texts = [" ".join(WORDS[i % len(WORDS) :][:5]) for i in range(10)]
    chunks = {f"d{i}#0": Chunk(f"d{i}#0", f"d{i}", t, 0, len(t)) for i, t in enumerate(texts)}
    run = {"q": {c: float(10 - i) for i, c in enumerate(chunks)}}
    queries = {"q": "oil pressure fault"}
    torch_rr = CrossEncoderReranker(tiny, depth=6, interpolation=1.0)
    onnx_rr = CrossEncoderReranker(tiny, depth=6, interpolation=1.0, backend="onnx")
    assert ranked(onnx_rr.rerank(queries, run, chunks)["q"]) == ranked(
        torch_rr.rerank(queries, run, chunks)["q"]
    )
    assert "backend" not in torch_rr.identity  # torch fp32: the score cache from before
    assert model_table(torch_rr.identity) != model_table(onnx_rr.identity)
    cache = StageCache(tmp_path)
    for rr in (torch_rr, onnx_rr):
        rr.attach_cache(cache.view("rerank_scores"))
        rr.stats.clear()
        rr.rerank(queries, run, chunks)
        assert rr.stats["pairs_scored"] == 6  # not served from the other backend's scores


def test_quantize_needs_onnx(tiny):
    with pytest.raises(OptionError, match="needs backend=onnx"):
        CrossEncoderReranker(tiny, quantize="int8")
