"""sentence-transformers models: any HF id or local path, and the offline ones of ``models.py``."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np

from rag_lab.errors import ConfigError
from rag_lab.models.onnx import attach, backend_identity, check_backend
from rag_lab.models.onnx_encoder import OnnxTextEncoder
from rag_lab.models.resolve import resolve_model, weights_hash
from rag_lab.runtime import progress
from rag_lab.validate import OptionError, boolean, integer

log = logging.getLogger(__name__)

SHARED_MODELS = 2
"""Loaded models this process keeps for later embedders of the same weights and settings (the
fallback chain's levels, every step of ``rag-lab walk``, a sweep's jobs in one worker): a load
costs ~2-3 s of CPU per model, paid once per process."""
_shared: OrderedDict[tuple, Any] = OrderedDict()
_shared_lock = threading.Lock()


class SentenceTransformerEmbedder:
    """Args:
    model: HF id or local path (``sentence-transformers/all-MiniLM-L6-v2``, ``./my-lora-merged``).
    query_prompt / document_prompt: strings prepended to queries / documents (e5: ``"query: "``,
        ``"passage: "``); ``None`` = none.
    batch_size: encoding batch size.
    normalize: L2-normalise (inner product = cosine).
    device: ``cpu``, ``cuda``, ``mps`` or ``None`` (sentence-transformers picks).
    max_seq_length: truncate inputs to this many model tokens (``None`` = the model's own limit).
    backend: ``torch`` or ``onnx`` (ONNX Runtime runs the transformer; exported once into the
        model cache, see ``rag_lab.models.onnx``). CPU only.
    quantize: ``none`` or ``int8`` (dynamic int8 weights; ``backend=onnx`` only).
    threads: ONNX Runtime intra-op threads (``None``: one per physical core); torch keeps its
        own setting. With int8 once the export exists (``rag_lab.models.onnx_encoder``, no torch
        loaded): texts encoded at once, one single-threaded session each (``None``: one per CPU,
        or ``OMP_NUM_THREADS``).
    fuse: fuse the exported graph (``Attention``, ``SkipLayerNormalization``... ONNX Runtime's
        transformer optimizer) before quantising (``rag_lab.models.onnx``; ``backend=onnx``
        only): measured no faster for e5 int8 on a 2-core AVX-512 CPU, so off by default.

    ``identity`` names the backend and quantisation (except torch fp32, the identity that
    predates them), so each variant's embeddings are cached apart.
    """

    def __init__(
        self,
        model: str,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
        batch_size: int = 64,
        normalize: bool = True,
        device: str | None = "cpu",
        max_seq_length: int | None = None,
        backend: str = "torch",
        quantize: str = "none",
        threads: int | None = None,
        fuse: bool = False,
    ) -> None:
        self.model_name = model
        self.query_prompt = query_prompt or None
        self.document_prompt = document_prompt or None
        self.batch_size = batch_size
        self.normalize = normalize
        self.device = device
        self.max_seq_length = max_seq_length
        self.backend, self.quantize = check_backend(backend, quantize)
        self.threads = None if threads is None else integer(threads, "threads", ge=1)
        self.fuse = boolean(fuse, "fuse")
        if self.backend == "onnx" and device not in (None, "cpu"):
            raise OptionError("device", device, "backend=onnx runs on the CPU (device: cpu)")

    @cached_property
    def path(self) -> str:
        return resolve_model(self.model_name)

    @cached_property
    def model(self):
        """The loaded model, shared with the process's other embedders of the same weights,
        device, backend and truncation (at most ``SHARED_MODELS`` kept): never modify it in place
        (training and adapters take :meth:`load`'s own copy)."""
        key = (
            self.path,
            self.device,
            self.backend,
            self.quantize,
            self.threads,
            self.fuse,
            self.max_seq_length,
        )
        with _shared_lock:
            st = _shared.get(key)
            if st is not None:
                _shared.move_to_end(key)
                return st
            st = self._lean()
            if st is None:
                st = self.load()  # builds the ONNX export on a machine's first run
                st = self._lean() or st  # then encodes as every later run will
            _shared[key] = st
            while len(_shared) > SHARED_MODELS:
                _shared.popitem(last=False)
            return st

    def _lean(self) -> OnnxTextEncoder | None:
        """The torch-free encoder of an int8 ONNX export this machine already has
        (``rag_lab.models.onnx_encoder``: the same vectors without importing sentence-transformers
        or reading the fp32 weights); ``None`` when it does not apply (first run: the export is
        built by :meth:`load`)."""
        if self.backend != "onnx" or self.quantize != "int8" or self.fuse:
            return None
        path = self.path
        return OnnxTextEncoder.open(path, weights_hash(path), self.max_seq_length, self.threads)

    def load(self):
        """A freshly loaded model of its own (the one to train or wrap)."""
        from sentence_transformers import SentenceTransformer

        path = self.path  # raises ConfigError itself when the model cannot be resolved offline
        progress.sync_libraries()  # transformers' "Loading weights" bar follows rag_lab's
        try:
            st = SentenceTransformer(path, device="cpu" if self.backend == "onnx" else self.device)
        except Exception as exc:  # network failure, bad path, incompatible checkpoint
            from rag_lab.models.resolve import _offline_help

            raise ConfigError(
                f"cannot load sentence-transformers model {self.model_name!r} "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); {_offline_help()}"
            ) from exc
        if self.max_seq_length:
            st.max_seq_length = self.max_seq_length
        if self.backend == "onnx":
            attach(st, weights_hash(path), self.quantize, self.threads, self.fuse)
        log.info(
            "loaded %s (max_seq_length %s, %s %s)",
            self.model_name,
            st.max_seq_length,
            self.backend,
            self.quantize,
        )
        return st

    @property
    def dimension(self) -> int:
        get_dim = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )  # renamed in sentence-transformers 6
        return int(get_dim())

    @cached_property
    def identity(self) -> dict:
        return {
            "kind": "sentence_transformers",
            "model": self.model_name,
            "weights": weights_hash(self.path),
            "query_prompt": self.query_prompt,
            "document_prompt": self.document_prompt,
            "normalize": self.normalize,
            "max_seq_length": self.max_seq_length,
            **backend_identity(self.backend, self.quantize, self.fuse),
        }

    def _encode(self, texts: Sequence[str], prompt: str | None) -> np.ndarray:
        corpus = len(texts) > self.batch_size  # a bar for a corpus, not for one query at a time
        model = self.model
        if isinstance(model, OnnxTextEncoder):
            if not corpus:
                return model.encode(texts, prompt, self.normalize)
            with progress.bar(total=len(texts), desc="embed", unit="text") as bar:
                return model.encode(texts, prompt, self.normalize, on_text=bar.update)
        with progress.batches(self.model, len(texts) if corpus else 0, "embed", "text"):
            emb = self.model.encode(
                list(texts),
                prompt=prompt,
                batch_size=self.batch_size,
                normalize_embeddings=self.normalize,
                convert_to_numpy=True,
                show_progress_bar=corpus and progress.enabled(),
            )
        return np.ascontiguousarray(emb, dtype=np.float32)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.query_prompt)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.document_prompt)
