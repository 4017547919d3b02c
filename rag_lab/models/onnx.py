"""ONNX Runtime inference for sentence-transformers models: embedders and cross-encoders.

A leaf shared by ``rag_lab.embedder.SentenceTransformerEmbedder`` and
``rag_lab.reranker.CrossEncoderReranker`` (``backend: onnx``, ``quantize: none | int8``).

Only the transformer's forward pass moves to ONNX Runtime: the model's ``transformers`` module
(``BertModel``, ``BertForSequenceClassification``...) is exported once with ``torch.onnx.export``
and, for ``int8``, dynamically quantised (``onnxruntime.quantization.quantize_dynamic``: int8
weights, per output channel, activations quantised on the fly). Tokenisation, prompts, pooling,
normalisation, length-sorted batching and ``predict``'s activation stay sentence-transformers' own,
so a model's pipeline (CLS or mean pooling, a ``Dense`` head, e5 prompts) is unchanged.

Why not sentence-transformers' own ``backend="onnx"``: it needs ``optimum-onnx``, whose releases
pin ``transformers < 4.58`` (this project runs transformers 5); ``onnxruntime`` + ``onnx`` are the
two packages this path needs (the ``onnx`` extra).

With ``fuse=True`` (opt-in: ``embedder.fuse`` / ``reranker.fuse``) the fp32 graph is first fused
by ONNX Runtime's transformer optimizer (``onnxruntime.transformers.optimizer``, BERT rules): each
layer's attention becomes one ``Attention`` node (``QAttention`` once quantised), residual +
LayerNorm ``SkipLayerNormalization``, bias + GELU ``BiasGelu``, the embeddings
``EmbedLayerNormalization``. Measured on e5 int8, 2-core AVX-512 CPU: no faster than the plain
graph (the int8 matrix products are the bulk; docs/results/performance.md, "Encoder backends"),
so it is off by default. The fused graph is kept only when every layer's attention fused and its
fp32 outputs match the plain graph's on a padded probe batch (``FUSE_ATOL``); otherwise (a model
the BERT rules do not cover) the plain graph is exported, and ``rag_lab_onnx.json`` says which.

Exports live in ``<cache_home>/models/onnx/<key>/model.onnx``, keyed by the source weights' hash,
the task (token embeddings or logits), the quantisation, ``fuse`` (when set) and
``EXPORT_VERSION``: each model is exported once per machine (MiniLM: ~2 s fp32, +1 s int8; e5:
~10 s, +15 s fusion, +15 s int8) and reused by every later run. Exports of an older version are
not reused (their key differs).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.errors import ConfigError
from rag_lab.io.locks import exclusive
from rag_lab.models.resolve import cache_home
from rag_lab.validate import choice

if TYPE_CHECKING:
    import onnxruntime

log = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx")
QUANTIZE = ("none", "int8")
EXPORT_VERSION = 1
"""Bump when the exported graph changes (export settings, quantisation recipe): old exports then
miss and are rebuilt. A fused export (``fuse=True``) is keyed apart from the plain one."""
FUSE_ATOL = 1e-3
"""Largest difference allowed between the fused and the plain fp32 graph's outputs on the probe
batch, relative to the outputs' largest magnitude (fusion only reorders float operations: MiniLM's
fused fp32 embeddings equal the plain ones to 2e-5, tested; e5's cosine to torch stays 1.00000)."""
MODEL_FILE = "model.onnx"
META_FILE = "rag_lab_onnx.json"


def check_backend(backend: str, quantize: str) -> tuple[str, str]:
    """Validate the pair; ``int8`` needs ``onnx`` (torch's dynamic quantisation is not offered)."""
    backend = choice(backend, "backend", BACKENDS)
    quantize = choice(quantize, "quantize", QUANTIZE)
    if quantize != "none" and backend != "onnx":
        from rag_lab.validate import OptionError

        raise OptionError("quantize", quantize, "needs backend=onnx")
    return backend, quantize


def backend_identity(backend: str, quantize: str, fuse: bool = False) -> dict[str, Any]:
    """What to add to a model's cache identity. Empty for torch fp32, so the embeddings and pair
    scores cached before backends existed stay valid; any other pair is named, with ``texts:
    alone`` for int8 (each text of a batch encoded on its own, ``_onnx_module``) and ``fuse:
    true`` (the fused graph computes slightly different int8 numbers) when the graph is fused."""
    if backend == "torch":
        return {}
    alone = {"texts": "alone"} if quantize == "int8" else {}
    return {"backend": backend, "quantize": quantize, **alone, **({"fuse": True} if fuse else {})}


def _require_onnxruntime() -> None:
    import importlib.util

    missing = [m for m in ("onnxruntime", "onnx") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(
            f"backend=onnx needs {' and '.join(missing)}: pip install onnxruntime onnx"
        )


def export_dir(weights: str, output: str, quantize: str, fuse: bool = False) -> Path:
    """Where the export of these weights lives (it may not exist yet); the plain graph's key is
    the one it had before fusion existed, so those exports stay valid."""
    from rag_lab.cache.keys import model_table

    spec = {"weights": weights, "output": output, "quantize": quantize, "version": EXPORT_VERSION}
    key = model_table({**spec, **({"fuse": True} if fuse else {})})
    return cache_home() / "models" / "onnx" / f"{output}-{quantize}-{key}"


@contextlib.contextmanager
def _quiet_root() -> Iterator[None]:
    """The root logger raised to ERROR: the optimizer and the quantiser log every fusion pattern
    tried and every skipped tensor there."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        root.setLevel(level)


def _probe_feeds(input_names: list[str], config: Any) -> dict[str, np.ndarray]:
    """A padded batch of token ids (the second row padded after 20 of 48 tokens)."""
    rng = np.random.default_rng(0)
    vocab = int(getattr(config, "vocab_size", 1000) or 1000)
    ids = rng.integers(5, max(6, min(vocab, 30000)), size=(2, 48), dtype=np.int64)
    mask = np.ones((2, 48), dtype=np.int64)
    mask[1, 20:] = 0
    feeds = {"input_ids": ids, "attention_mask": mask}
    return {n: feeds.get(n, np.zeros((2, 48), dtype=np.int64)) for n in input_names}


def _run(path: Path, feeds: dict[str, np.ndarray], output: str) -> np.ndarray:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return np.asarray(sess.run([output], feeds)[0])


def fused_graph(plain: Path, target: Path, config: Any, input_names: list[str], output: str):
    """Write ``target``: ``plain`` (an fp32 export) with ONNX Runtime's BERT fusions, and return
    the fused node counts; ``None`` (nothing written) when the model's attention did not fuse in
    every layer or the fused outputs differ from the plain graph's (``FUSE_ATOL``)."""
    heads = getattr(config, "num_attention_heads", None)
    hidden = getattr(config, "hidden_size", None)
    layers = getattr(config, "num_hidden_layers", None)
    if not (heads and hidden and layers):
        log.info("ONNX fusion skipped: the config names no heads / hidden size / layers")
        return None
    from onnxruntime.transformers.optimizer import optimize_model

    with _quiet_root():
        model = optimize_model(
            str(plain), model_type="bert", num_heads=int(heads), hidden_size=int(hidden)
        )
        counts = {k: v for k, v in model.get_fused_operator_statistics().items() if v}
    if counts.get("Attention", 0) != int(layers):
        log.info("ONNX fusion skipped: %s of %s attention layers fused", counts, layers)
        return None
    model.save_model_to_file(str(target))
    feeds = _probe_feeds(input_names, config)
    ref, got = _run(plain, feeds, output), _run(target, feeds, output)
    if output == "last_hidden_state":  # padded positions are never read (pooling masks them)
        keep = feeds["attention_mask"].astype(bool) if "attention_mask" in feeds else ...
        ref, got = ref[keep], got[keep]
    err = float(np.abs(ref - got).max()) / max(1.0, float(np.abs(ref).max()))
    if not err <= FUSE_ATOL:
        log.warning("ONNX fusion not used: the fused graph differs by %.2g (relative)", err)
        target.unlink()
        return None
    return counts


def _export(
    hf_model: Any,
    input_names: list[str],
    output: str,
    target: Path,
    quantize: str,
    fuse: bool = False,
) -> dict[str, Any]:
    """Write ``target/model.onnx`` from a loaded ``transformers`` model (its ``output`` field);
    return what the export's meta file records about the graph (fused or not, its fused ops)."""
    import torch

    class _Forward(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = hf_model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            out = self.model(**dict(zip(input_names, inputs)), return_dict=True)
            return out[output]

    if hasattr(hf_model, "set_attn_implementation"):
        # eager attention traces to plain MatMul/Softmax; the sdpa path traces shape-dependent
        # shortcuts (an all-ones mask dropped) that would be baked into the graph
        hf_model.set_attn_implementation("eager")
    hf_model.eval()
    # a padded dummy batch: the traced mask arithmetic must be the general one
    ids = torch.full((2, 8), 5, dtype=torch.long)
    mask = torch.ones((2, 8), dtype=torch.long)
    mask[1, 5:] = 0
    dummy = {"input_ids": ids, "attention_mask": mask}
    args = tuple(dummy.get(n, torch.zeros((2, 8), dtype=torch.long)) for n in input_names)
    axes = {n: {0: "batch", 1: "sequence"} for n in input_names}
    axes[output] = {0: "batch"} if output == "logits" else {0: "batch", 1: "sequence"}
    fp32 = target / "model_plain.onnx"
    with torch.no_grad():
        torch.onnx.export(
            _Forward(),
            args,
            str(fp32),
            input_names=input_names,
            output_names=[output],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    counts = None
    if fuse:
        fused = target / "model_fused.onnx"
        counts = fused_graph(fp32, fused, hf_model.config, input_names, output)
        if counts is not None:
            fp32.unlink()
            fp32 = fused
    if quantize == "int8":
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        # per-channel int8 weights: per-tensor scales cost MiniLM embeddings up to 0.10 cosine
        # (measured: min cosine to fp32 0.90 per-tensor, 0.99 per-channel on SciFact docs).
        # The fused ops (com.microsoft domain) have no shape inference: their outputs are float
        with _quiet_root():
            quantize_dynamic(
                str(fp32),
                str(target / MODEL_FILE),
                weight_type=QuantType.QInt8,
                per_channel=True,
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        fp32.unlink()
    else:
        fp32.rename(target / MODEL_FILE)
    return {"fused": counts is not None, **({"fused_ops": counts} if counts else {})}


def exported_model(
    hf_model: Any,
    input_names: list[str],
    output: str,
    weights: str,
    quantize: str,
    fuse: bool = False,
) -> Path:
    """The ONNX file of ``hf_model`` (exported now if this machine has not exported it before)."""
    _require_onnxruntime()
    final = export_dir(weights, output, quantize, fuse)
    if (final / META_FILE).is_file():
        return final / MODEL_FILE
    with exclusive(final):  # parallel workers export it once
        if not (final / META_FILE).is_file():
            _export_into(hf_model, input_names, output, weights, quantize, final, fuse)
    return final / MODEL_FILE


def _export_into(
    hf_model: Any,
    input_names: list[str],
    output: str,
    weights: str,
    quantize: str,
    final: Path,
    fuse: bool,
) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        log.info("exporting %s to ONNX (%s) in %s", output, quantize, final)
        graph = _export(hf_model, input_names, output, tmp, quantize, fuse)
        meta: dict[str, Any] = {"weights": weights, "output": output, "inputs": input_names}
        meta |= {"quantize": quantize, "version": EXPORT_VERSION, "fuse": fuse, **graph}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
        try:
            os.replace(tmp, final)
        except OSError:  # another process exported it first
            if not (final / META_FILE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def session(path: Path, threads: int | None) -> onnxruntime.InferenceSession:
    """A CPU session; ``threads`` = intra-op threads (``None``: ``OMP_NUM_THREADS`` when the
    environment sets it, as for torch, else ONNX Runtime's default, one per physical core)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    from rag_lab.runtime import threads as shared_threads

    if threads is None:
        threads = shared_threads.omp_threads()
    if threads:
        opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1  # one graph at a time: parallelism is inside the MatMuls

    if shared_threads.in_worker():
        # beside sibling workers (a sweep's, the walk's) idle pool threads must sleep, not spin:
        # a spinning thread takes the core the other worker is encoding on
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _onnx_module(sess: onnxruntime.InferenceSession, config: Any, output: str, alone: bool = False):
    """A stand-in for the ``transformers`` model inside a sentence-transformers ``Transformer``
    module: same call (keyword tensors in, ``{output: tensor}`` out), run by ONNX Runtime.

    ``alone``: each text of a batch runs on its own, without its padding. Dynamic int8
    quantisation scales a MatMul's activations by the range of the whole input tensor, so in a
    batch a text's vector depends on the texts beside it (e5: cosine down to 0.995 between the
    same passage alone and in a batch): a cache filled by one run would then hold vectors another
    run computes differently. Alone, a text's vector is the one a batch of one gives, in any
    batch. It is also faster on CPU: no padding (the README job's 204 e5 chunks: 25.0 s batched
    by 64, 12.2 s alone; docs/results/performance.md)."""
    import torch

    names = [i.name for i in sess.get_inputs()]

    def run_alone(feeds: dict[str, np.ndarray]) -> np.ndarray:
        mask = feeds.get("attention_mask")
        width = feeds[names[0]].shape[1]
        rows = []
        for i in range(feeds[names[0]].shape[0]):
            lo, hi = 0, width
            if mask is not None:
                kept = np.flatnonzero(mask[i])
                if len(kept) and kept[-1] + 1 - kept[0] == len(kept):  # one span: the text
                    lo, hi = int(kept[0]), int(kept[-1]) + 1
            out = sess.run([output], {n: v[i : i + 1, lo:hi] for n, v in feeds.items()})[0]
            if output == "last_hidden_state" and (lo, hi) != (0, width):
                full = np.zeros((1, width, out.shape[-1]), dtype=out.dtype)
                full[:, lo:hi] = out  # padding positions: masked out by the pooling
                out = full
            rows.append(out)
        return np.concatenate(rows)

    class OnnxTransformer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = config
            self.device = torch.device("cpu")

        def forward(self, **features: Any) -> dict[str, torch.Tensor]:
            feeds = {}
            for n in names:
                x = features[n]
                feeds[n] = np.ascontiguousarray(
                    x.numpy() if isinstance(x, torch.Tensor) else x, dtype=np.int64
                )
            if alone and feeds[names[0]].shape[0] > 1:
                return {output: torch.from_numpy(run_alone(feeds))}
            return {output: torch.from_numpy(sess.run([output], feeds)[0])}

    return OnnxTransformer()


def attach(st: Any, weights: str, quantize: str, threads: int | None, fuse: bool = False) -> None:
    """Swap the ``transformers`` model of ``st`` (a ``SentenceTransformer`` or ``CrossEncoder``
    whose first module is a ``Transformer``) for its ONNX export; the torch weights are freed."""
    module = st[0]
    output = module.modality_config["text"]["method_output_name"]
    if output not in ("last_hidden_state", "logits"):
        raise ConfigError(f"backend=onnx supports text transformers only (this one: {output!r})")
    sample = st.preprocess(["a"] if output == "last_hidden_state" else [("a", "b")])
    input_names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample]
    path = exported_model(module.model, input_names, output, weights, quantize, fuse)
    sess = session(path, threads)
    module.model = _onnx_module(sess, module.model.config, output, alone=quantize == "int8")
    log.info("ONNX Runtime %s (%s, %s threads): %s", output, quantize, threads or "default", path)
