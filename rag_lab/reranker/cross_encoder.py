"""Cross-encoder reranking: score (query, chunk) pairs jointly and re-order the head of a run.

Any sequence-classification checkpoint with one output works: one trained with ``rag-lab train
reranker``, or a pretrained reranker a user has (``BAAI/bge-reranker-base``, ms-marco MiniLM...).
Scores are cached per (model, query text, chunk text) in the stage cache's ``rerank_scores``
namespace, so sweeping ``depth`` or the interpolation weight never re-scores a pair.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.cache.keys import model_table, pair_key
from rag_lab.errors import ConfigError
from rag_lab.models.onnx import attach, backend_identity, check_backend
from rag_lab.models.resolve import resolve_model, weights_hash
from rag_lab.ranking import minmax, ranked
from rag_lab.runtime import progress, threads
from rag_lab.types import Chunk, Run
from rag_lab.validate import OptionError, boolean, integer, number

if TYPE_CHECKING:
    from rag_lab.cache import CacheView

log = logging.getLogger(__name__)
RERANKER_META = "rag_lab_reranker.json"


def interpolate(first: np.ndarray, rerank: np.ndarray, weight: float) -> np.ndarray:
    """``weight`` · minmax(reranker) + (1 − weight) · minmax(first stage), per query: 1 trusts the
    reranker alone, 0 keeps the first-stage order (a weak reranker can only nudge it)."""
    return weight * minmax(rerank) + (1.0 - weight) * minmax(first)


class CrossEncoderReranker:
    """Args:
    model: a local path or HF id of a cross-encoder (one output logit).
    depth: rerank the top ``depth`` chunks of each query; 0 passes the run through unchanged
        (so one sweep can compare with and without reranking).
    interpolation: weight of the reranker score against the first-stage score (see
        ``interpolate``); ``None`` = the value ``rag-lab train reranker`` chose on dev and wrote to
        the model's ``rag_lab_reranker.json``, else 1.0 (pure reranker order).
    batch_size: pairs per forward pass (pairs of all queries are batched together, sorted by
        length).
    max_length: truncate pairs to this many model tokens (``None`` = the model's setting).
    cache_dir: deprecated and ignored (configs written before 0.2 set it): the pipeline
        hands the reranker a view of the stage cache's ``rerank_scores`` namespace.
    device: ``cpu``, ``cuda``, ``mps`` or ``None`` (auto).
    backend: ``torch`` or ``onnx`` (ONNX Runtime runs the transformer, exported once into the
        model cache; see ``rag_lab.models.onnx``). CPU only.
    quantize: ``none`` or ``int8`` (dynamic int8 weights; ``backend=onnx`` only).
    threads: ONNX Runtime intra-op threads (``None``: one per physical core).
    fuse: fuse the exported graph (``Attention``, ``SkipLayerNormalization``... ONNX Runtime's
        transformer optimizer) before quantising (``rag_lab.models.onnx``; ``backend=onnx``
        only): measured no faster for e5 int8 on a 2-core AVX-512 CPU, so off by default.

    ``identity`` names the backend and quantisation (except torch fp32, the identity that
    predates them), so their pair scores are cached apart.
    """

    cache_namespace = "rerank_scores"

    def __init__(
        self,
        model: str,
        depth: int = 100,
        interpolation: float | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
        cache_dir: str | None = None,
        device: str | None = "cpu",
        backend: str = "torch",
        quantize: str = "none",
        threads: int | None = None,
        fuse: bool = False,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise OptionError("model", model, "must be a model path or id")
        self.model_name = model
        self.depth = integer(depth, "depth", ge=0)
        if interpolation is not None:
            interpolation = number(interpolation, "interpolation", ge=0, le=1)
        self.batch_size = integer(batch_size, "batch_size", ge=1)
        self.max_length = None if max_length is None else integer(max_length, "max_length", ge=1)
        self.device = device
        self.backend, self.quantize = check_backend(backend, quantize)
        self.threads = None if threads is None else integer(threads, "threads", ge=1)
        self.fuse = boolean(fuse, "fuse")
        if self.backend == "onnx" and device not in (None, "cpu"):
            raise OptionError("device", device, "backend=onnx runs on the CPU (device: cpu)")
        if cache_dir:
            log.warning("reranker.cache_dir is ignored: the stage cache is set by cache.dir")
        self._cache: CacheView | None = None
        self._interpolation = interpolation
        self.flush_every = 2048  # pairs scored between writes to the score cache
        self.stats: dict[str, float] = {}

    @cached_property
    def path(self) -> str:
        return resolve_model(self.model_name)

    @cached_property
    def meta(self) -> dict[str, Any]:
        f = Path(self.path) / RERANKER_META
        return json.loads(f.read_text()) if f.is_file() else {}

    @property
    def interpolation(self) -> float:
        if self._interpolation is not None:
            return float(self._interpolation)
        return float(self.meta.get("interpolation", 1.0))

    @cached_property
    def model(self):
        from sentence_transformers import CrossEncoder

        progress.sync_libraries()  # transformers' "Loading weights" bar follows rag_lab's
        device = "cpu" if self.backend == "onnx" else self.device
        try:
            ce = CrossEncoder(self.path, max_length=self.max_length, device=device)
        except Exception as exc:
            raise ConfigError(
                f"cannot load cross-encoder {self.model_name!r} "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
            ) from exc
        if self.backend == "onnx":
            attach(ce, weights_hash(self.path), self.quantize, self.threads, self.fuse)
        return ce

    @cached_property
    def identity(self) -> dict[str, Any]:
        return {
            "kind": "cross_encoder",
            "model": self.model_name,
            "weights": weights_hash(self.path),
            "max_length": self.max_length,
            **backend_identity(self.backend, self.quantize, self.fuse),
        }

    def attach_cache(self, view: CacheView) -> None:
        self._cache = view

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Raw scores of (query, text) pairs: cached ones read back, the rest batched through the
        model."""
        keys = [pair_key(q, t) for q, t in pairs]
        table = model_table(self.identity) if self._cache is not None else ""
        known = self._cache.get_floats(table, keys) if self._cache is not None else {}
        todo = sorted(
            {k: i for i, k in enumerate(keys) if k not in known}.values(),
            key=lambda i: len(pairs[i][0]) + len(pairs[i][1]),
        )
        fresh: dict[str, float] = {}
        shown = len(todo) if len(todo) > self.batch_size else 0  # a depth-100 rerank, not 1 query
        with progress.batches(self.model, shown, "rerank", "pair"):
            for start in range(
                0, len(todo), self.flush_every
            ):  # stored as it goes: an interrupted run keeps its scores
                part = todo[start : start + self.flush_every]
                threads.rebalance()  # a sweep worker: its share of the cores right now
                scores = self.model.predict(
                    [pairs[i] for i in part],
                    batch_size=self.batch_size,
                    show_progress_bar=len(part) > self.batch_size and progress.enabled(),
                    convert_to_numpy=True,
                    activation_fn=None,
                )
                new = {keys[i]: float(s) for i, s in zip(part, np.asarray(scores).reshape(-1))}
                if self._cache is not None:
                    self._cache.put_floats(table, new)
                fresh.update(new)
                if len(todo) > self.flush_every:
                    log.info("reranker: scored %d / %d new pairs", len(fresh), len(todo))
        self.stats["pairs_scored"] = self.stats.get("pairs_scored", 0) + len(fresh)
        self.stats["pairs_cached"] = self.stats.get("pairs_cached", 0) + len(pairs) - len(fresh)
        return np.array([known.get(k, fresh.get(k, np.nan)) for k in keys], dtype=np.float64)

    def rerank(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run:
        """Re-score the head of each query's ranking (see the ``Reranker`` contract)."""
        if self.depth == 0:
            return {q: dict(r) for q, r in run.items()}
        _ = self.model  # loading is not reranking time
        t0 = time.perf_counter()
        heads: dict[str, list[str]] = {}
        pairs: list[tuple[str, str]] = []
        for qid, scores in run.items():
            heads[qid] = ranked(scores)[: self.depth]
            pairs.extend((queries[qid], chunks[c].index_text) for c in heads[qid])
        raw = self.score(pairs) if pairs else np.zeros(0)
        weight = self.interpolation
        out: Run = {}
        pos = 0
        for qid, scores in run.items():
            head = heads[qid]
            ce = raw[pos : pos + len(head)]
            pos += len(head)
            first = np.array([scores[c] for c in head], dtype=np.float64)
            combined = interpolate(first, ce, weight)
            # head scores sit in [1, 2]; the tail keeps its order below them
            new = {c: 1.0 + float(s) for c, s in zip(head, combined)}
            tail = [c for c in ranked(scores) if c not in new]
            new.update({c: 0.9 * (1.0 - i / max(len(tail), 1)) for i, c in enumerate(tail)})
            out[qid] = new
        elapsed = time.perf_counter() - t0
        self.stats["rerank_seconds"] = self.stats.get("rerank_seconds", 0.0) + elapsed
        self.stats["ms_per_query"] = 1000 * elapsed / max(len(run), 1)
        self.stats["interpolation"] = weight
        return out

    def process(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run:
        return self.rerank(queries, run, chunks)
