"""The torch-free int8 encoder (``rag_lab.models.onnx_encoder``): once the export exists, the
embedder loads it instead of sentence-transformers and computes the same token ids and vectors
(to float rounding), in lanes that do not change a vector, and it leaves layouts it does not
reproduce to sentence-transformers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_lab.embedder import SentenceTransformerEmbedder
from rag_lab.models.onnx_encoder import OnnxTextEncoder, _pipeline

pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

WORDS = "pump oil pressure fault e102 hydraulic filter air compressor spindle grease hours".split()
TEXTS = [
    "pump",
    "oil pressure fault e102 on the hydraulic pump " * 6,  # long: truncated at max_seq_length
    "air filter",
    "spindle grease hours compressor",
    "",
    "unknown words only",
]


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory) -> str:
    """A 2-layer random BERT saved as a sentence-transformers folder (modules.json: Transformer,
    mean Pooling, Normalize; tokenizer.json)."""
    from sentence_transformers import SentenceTransformer, models
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece
    from transformers import BertConfig, BertModel, BertTokenizerFast

    plain = tmp_path_factory.mktemp("tiny_plain")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tk = Tokenizer(WordPiece({w: i for i, w in enumerate([*specials, *WORDS])}, unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    BertTokenizerFast(
        tokenizer_object=tk,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    ).save_pretrained(plain)
    cfg = BertConfig(
        vocab_size=len(WORDS) + 5,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(plain)
    word = models.Transformer(str(plain))
    st = SentenceTransformer(modules=[word, models.Pooling(32, "mean"), models.Normalize()])
    folder = tmp_path_factory.mktemp("tiny_st")
    st.save(str(folder))
    assert (folder / "tokenizer.json").is_file()
    return str(folder)


def _embedder(path: str, **kw) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(
        path,
        batch_size=2,
        max_seq_length=16,
        backend="onnx",
        quantize="int8",
        query_prompt="filter ",  # words of the vocabulary: the prompts differ
        document_prompt="grease ",
        **kw,
    )


def test_the_lean_encoder_is_the_sentence_transformers_path(home, tiny_st):
    lean = _embedder(tiny_st)
    assert lean._lean() is None  # no export on this machine yet
    assert isinstance(lean.model, OnnxTextEncoder)  # the load built it, then opened it lean
    st = lean.load()  # sentence-transformers with the ONNX forward pass (rag_lab.models.onnx)
    assert not isinstance(st, OnnxTextEncoder)
    kw = {"batch_size": 2, "normalize_embeddings": True, "convert_to_numpy": True}
    ref_docs = st.encode(TEXTS, prompt="grease ", **kw)
    ref_queries = np.vstack([st.encode([t], prompt="filter ", **kw) for t in TEXTS])
    assert lean.dimension == 32
    feats = st.preprocess(TEXTS, prompt="grease ")
    mask = feats["attention_mask"].numpy().astype(bool)
    want = [feats["input_ids"][i][mask[i]].tolist() for i in range(len(TEXTS))]
    assert lean.model.token_ids(TEXTS, "grease ") == want
    assert max(len(ids) for ids in want) == 16  # the long text was truncated
    docs = lean.encode_documents(TEXTS)
    np.testing.assert_allclose(docs, ref_docs, atol=1e-6, rtol=0)
    np.testing.assert_allclose(lean.encode_queries(TEXTS), ref_queries, atol=1e-6, rtol=0)
    assert lean.model.token_ids(["pump"], "filter ") == [[2, 11, 5, 3]]  # [CLS] filter pump [SEP]
    assert not np.array_equal(docs, lean.encode_queries(TEXTS))  # the prompts differ
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-6)


def test_lanes_do_not_change_a_vector(home, tiny_st):
    assert _embedder(tiny_st).dimension == 32  # loaded: the export exists after this
    one = _embedder(tiny_st, threads=1)
    three = _embedder(tiny_st, threads=3)
    assert isinstance(one.model, OnnxTextEncoder) and isinstance(three.model, OnnxTextEncoder)
    texts = TEXTS * 5
    a = one.encode_documents(texts)
    b = three.encode_documents(texts)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(b[: len(TEXTS)], b[len(TEXTS) : 2 * len(TEXTS)])
    assert len(three.model._sessions) == 3


def test_other_layouts_are_left_to_sentence_transformers(home, tiny_st, tmp_path):
    assert _pipeline(Path(tiny_st)) == ("mean", 32, True)
    no_prompt = tmp_path / "no_prompt"
    shutil.copytree(tiny_st, no_prompt)
    pooling = next(no_prompt.glob("*Pooling/config.json"))
    cfg = json.loads(pooling.read_text())
    pooling.write_text(json.dumps({**cfg, "include_prompt": False}))
    assert _pipeline(no_prompt) is None
    dense = tmp_path / "dense"
    shutil.copytree(tiny_st, dense)
    modules = json.loads((dense / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "x.models.Dense"})
    (dense / "modules.json").write_text(json.dumps(modules))
    assert _pipeline(dense) is None
    # fp32, a fused graph, no max_seq_length: the sentence-transformers path
    assert _embedder(tiny_st, fuse=True)._lean() is None
    fp32 = SentenceTransformerEmbedder(tiny_st, max_seq_length=16, backend="onnx")
    assert fp32._lean() is None
    assert SentenceTransformerEmbedder(tiny_st, backend="onnx", quantize="int8")._lean() is None


@pytest.mark.slow  # the session's home builds e5 and its export first (~40 s)
def test_e5_loads_without_torch_once_exported():
    """The default embedder, with its export in the home (built here first when missing, as by
    the README's first run): loading and encoding import neither torch nor
    sentence-transformers."""
    code = (
        "import sys\n"
        "from rag_lab.embedder import SentenceTransformerEmbedder as E\n"
        "from rag_lab.models.onnx import export_dir\n"
        "from rag_lab.models.resolve import weights_hash\n"
        "e = E('intfloat/multilingual-e5-small', max_seq_length=512, backend='onnx',"
        " quantize='int8', query_prompt='query: ', document_prompt='passage: ')\n"
        "if not (export_dir(weights_hash(e.path), 'last_hidden_state', 'int8')"
        " / 'model.onnx').is_file():\n"
        "    e.model\n"  # builds the export (torch): done once per machine
        "    print('built')\n"
        "    sys.exit(0)\n"
        "v = e.encode_documents(['Hydraulic pump overheats', 'oil filter'])\n"
        "print(type(e.model).__name__, v.shape, 'torch' in sys.modules,"
        " 'sentence_transformers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    if out.stdout.strip() == "built":
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
    assert out.stdout.split() == ["OnnxTextEncoder", "(2,", "384)", "False", "False"]


def test_the_lean_encoder_logs_its_progress_without_a_terminal(home, tiny_st, monkeypatch, caplog):
    from rag_lab.runtime import progress

    emb = _embedder(tiny_st, threads=2)
    assert isinstance(emb.model, OnnxTextEncoder)
    texts = TEXTS * 5  # more than batch_size: a corpus, with a progress line
    progress.configure(False)
    plain = emb.encode_documents(texts)
    progress.configure("auto")
    monkeypatch.setenv(progress.INTERVAL_ENV, "0.000001")
    with caplog.at_level("INFO", logger="rag_lab.progress"):
        logged = emb.encode_documents(texts)
    assert progress.mode() == "log"  # pytest's captured stderr is no terminal
    np.testing.assert_array_equal(logged, plain)
    lines = [r.getMessage() for r in caplog.records if r.name == "rag_lab.progress"]
    assert lines and lines[-1].startswith(f"embed: {len(texts)}/{len(texts)} text (100%)"), lines
