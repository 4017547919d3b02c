"""A sentence-transformers text embedder run from its ONNX int8 export without torch.

``SentenceTransformer`` + ``rag_lab.models.onnx.attach`` runs only the transformer's forward pass
in ONNX Runtime; loading it still imports sentence-transformers (with transformers, torch, scikit-
learn, scipy, pandas: ~5 s of CPU on a quiet 2-core machine, ~10 s under load) and reads the fp32
torch weights (~2 s) only to swap them out. Once the export exists (``exported_model``: built on
the first run on a machine) none of that is needed for an embedder whose pipeline is
``[Transformer, Pooling (mean or CLS), Normalize]`` (e5, MiniLM): :class:`OnnxTextEncoder` does the
same steps with ``tokenizers`` (the fast tokenizer's own Rust library, ``tokenizer.json``),
ONNX Runtime and numpy:

- the prompt prepended to the text, as ``SentenceTransformer.encode(prompt=...)``;
- each text tokenised and run alone (``texts: alone``, as ``_onnx_module`` runs int8 batches: a
  text's vector never depends on its batch), truncated to ``max_seq_length`` tokens;
- mean pooling over the text's tokens (or its first token), then L2 normalisation.

The token ids are those of sentence-transformers' tokenizer call and the ONNX outputs are the same
graph's; only the pooling's float additions run in numpy's order instead of torch's (vectors equal
to ~1e-7, tested against the sentence-transformers path). Anything else (a ``Dense`` head, pooling
without the prompt, lower-casing, fp32 or fused graphs, no ``tokenizer.json``) is left to the
sentence-transformers path: :meth:`OnnxTextEncoder.open` returns ``None``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_lab.models.onnx import META_FILE, MODEL_FILE, export_dir, session

log = logging.getLogger(__name__)

OUTPUT = "last_hidden_state"
POOLING = ("mean", "cls")
TRANSFORMER = "sentence_transformers.base.modules.transformer.Transformer"
KNOWN = {
    "Transformer": "transformer",
    "Pooling": "pooling",
    "Normalize": "normalize",
}


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _pipeline(model_dir: Path) -> tuple[str, int, bool] | None:
    """(pooling mode, dimension, normalize) of a ``[Transformer, Pooling, Normalize?]`` model
    directory; ``None`` for any other layout or setting the lean path does not reproduce."""
    modules = _read(model_dir / "modules.json")
    if not isinstance(modules, list) or not modules:
        return None
    kinds = [KNOWN.get(str(m.get("type", "")).rsplit(".", 1)[-1]) for m in modules]
    if kinds not in (["transformer", "pooling"], ["transformer", "pooling", "normalize"]):
        return None
    if modules[0].get("path", "") not in ("", "."):
        return None
    pooling = _read(model_dir / modules[1].get("path", "") / "config.json")
    st_config = _read(model_dir / "sentence_bert_config.json") or {}
    if not isinstance(pooling, dict) or st_config.get("do_lower_case"):
        return None
    mode = pooling.get("pooling_mode")
    if mode is None:  # sentence-transformers < 6 wrote one boolean per mode
        modes = [m for m in POOLING if pooling.get(f"pooling_mode_{m}_tokens")]
        others = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v]
        mode = modes[0] if len(modes) == 1 and len(others) == 1 else None
    dim = pooling.get("embedding_dimension") or pooling.get("word_embedding_dimension")
    if mode not in POOLING or not dim or pooling.get("include_prompt", True) is not True:
        return None
    task = st_config.get("transformer_task", "feature-extraction")
    output = st_config.get("module_output_name", "token_embeddings")
    if task != "feature-extraction" or output != "token_embeddings":
        return None
    return str(mode), int(dim), kinds[-1] == "normalize"


class OnnxTextEncoder:
    """``encode`` of a sentence-transformers text embedder from its existing ONNX int8 export.

    Build it with :meth:`open`; it is shared like a loaded ``SentenceTransformer`` (read-only)."""

    def __init__(
        self,
        tokenizer: Any,
        model_file: Path,
        inputs: list[str],
        pooling: str,
        dimension: int,
        normalize: bool,
        max_seq_length: int,
        lanes: int | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.model_file = model_file
        self.inputs = inputs
        self.pooling = pooling
        self.dimension = dimension
        self.normalize = normalize
        self.max_seq_length = max_seq_length
        self.lanes = lanes
        self._sessions: list[Any] = []
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        model_dir: str,
        weights: str,
        max_seq_length: int | None,
        lanes: int | None,
    ) -> OnnxTextEncoder | None:
        """The encoder of ``model_dir`` (a local sentence-transformers directory) with the int8
        export of ``weights`` already on this machine; ``None`` when the lean path does not apply
        (no export yet, no ``tokenizer.json``, no ``max_seq_length``, another module layout).
        ``lanes``: texts encoded at once (``None``: :func:`lanes`)."""
        root = Path(model_dir)
        if not max_seq_length or not root.is_dir() or not (root / "tokenizer.json").is_file():
            return None
        found = _pipeline(root)
        if found is None:
            return None
        final = export_dir(weights, OUTPUT, "int8")
        meta = _read(final / META_FILE)
        if not isinstance(meta, dict) or not (final / MODEL_FILE).is_file():
            return None
        inputs = [str(n) for n in meta.get("inputs", [])]
        if not inputs or inputs[0] != "input_ids" or meta.get("fused"):
            return None
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(root / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_length=int(max_seq_length))
        pooling, dim, normalize = found
        enc = cls(
            tok, final / MODEL_FILE, inputs, pooling, dim, normalize, int(max_seq_length), lanes
        )
        enc._session(0)  # the first session now: a broken export fails here, at load
        log.info("ONNX Runtime %s (int8, lean, %s lanes): %s", OUTPUT, lanes or "auto", final)
        return enc

    def _session(self, lane: int) -> Any:
        """Lane ``lane``'s single-threaded session (opened on first use, in the lane's thread)."""
        with self._lock:
            if lane < len(self._sessions):
                return self._sessions[lane]
        sess = session(self.model_file, 1)
        with self._lock:
            while len(self._sessions) <= lane:
                self._sessions.append(None)
            if self._sessions[lane] is None:
                self._sessions[lane] = sess
            return self._sessions[lane]

    def get_embedding_dimension(self) -> int:
        return self.dimension

    def token_ids(self, texts: Sequence[str], prompt: str | None = None) -> list[list[int]]:
        """Each text's model token ids (special tokens included, truncated), prompt prepended."""
        texts = [(prompt or "") + t for t in texts]
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=True)]

    def _vector(self, sess: Any, ids: list[int]) -> np.ndarray:
        row = np.asarray(ids, dtype=np.int64)[None, :]
        feeds = {
            n: row
            if n == "input_ids"
            else (np.ones_like(row) if n == "attention_mask" else np.zeros_like(row))
            for n in self.inputs
        }
        tokens = sess.run([OUTPUT], feeds)[0][0]
        if self.pooling == "cls":
            return np.asarray(tokens[0], dtype=np.float32)
        return np.asarray(tokens.sum(axis=0, dtype=np.float32) / np.float32(len(ids)))

    def encode(
        self,
        texts: Sequence[str],
        prompt: str | None = None,
        normalize_embeddings: bool = False,
        on_text: Callable[[], None] | None = None,
    ) -> np.ndarray:
        """One float32 row per text, in order (``on_text`` called after each). The texts are
        shared out, longest first, among ``lanes`` threads, each running its own single-threaded
        session: a text's vector is the same whichever lane encodes it (the same graph on one
        thread, the text alone)."""
        ids = self.token_ids(texts, prompt)
        out = np.zeros((len(ids), self.dimension), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        todo = iter(order)  # next() on a list iterator is atomic under the GIL
        done = threading.Lock()

        def lane(number: int) -> None:
            sess = self._session(number)
            for i in todo:
                out[i] = self._vector(sess, ids[i])
                if on_text is not None:
                    with done:
                        on_text()

        n = min(len(ids), self.lanes or lanes())
        if n <= 1:
            lane(0)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(n, thread_name_prefix="rag-lab-embed") as pool:
                for f in [pool.submit(lane, k) for k in range(n)]:
                    f.result()
        # as sentence-transformers: the Normalize module, then encode's normalize_embeddings
        for _ in range(int(self.normalize) + int(normalize_embeddings)):
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), np.float32(1e-12))
        return out


def lanes() -> int:
    """Texts encoded at once by default: ``OMP_NUM_THREADS`` when set (a sweep worker's share of
    the cores, ``rag_lab.runtime.threads``), else the CPUs this process may run on."""
    from rag_lab.runtime import threads

    return threads.omp_threads() or threads.usable_cpus()
