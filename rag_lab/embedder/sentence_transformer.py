"""sentence-transformers models: any HF id or local path, and the offline ones of ``models.py``."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import cached_property

import numpy as np

from rag_lab.errors import ConfigError
from rag_lab.models.onnx import attach, backend_identity, check_backend
from rag_lab.models.resolve import resolve_model, weights_hash
from rag_lab.runtime import progress
from rag_lab.validate import OptionError, integer

log = logging.getLogger(__name__)


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
        own setting.

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
        if self.backend == "onnx" and device not in (None, "cpu"):
            raise OptionError("device", device, "backend=onnx runs on the CPU (device: cpu)")

    @cached_property
    def path(self) -> str:
        return resolve_model(self.model_name)

    @cached_property
    def model(self):
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
            attach(st, weights_hash(path), self.quantize, self.threads)
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
            **backend_identity(self.backend, self.quantize),
        }

    def _encode(self, texts: Sequence[str], prompt: str | None) -> np.ndarray:
        corpus = len(texts) > self.batch_size  # a bar for a corpus, not for one query at a time
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
