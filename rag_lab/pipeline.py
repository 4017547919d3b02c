"""The one place that instantiates pipeline stages from config, and the pipeline they form.

``build_pipeline(cfg)`` walks the resolved config, refuses any ``_target_`` outside the allow-list
(configs may come from disk: exports, sweeps), and instantiates each stage with
``_convert_="all"`` so stages receive plain dicts and lists.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from rag_lab.chunker.base import Chunker
from rag_lab.errors import ConfigError
from rag_lab.fusion.base import Fusion
from rag_lab.parser.base import Parser
from rag_lab.reranker.base import Reranker
from rag_lab.retrievers.base import Retriever
from rag_lab.types import Chunk, Document, Run

log = logging.getLogger(__name__)

# Packages whose classes a config may name: rag_lab itself and the libraries it wraps.
ALLOWED_TARGET_PREFIXES = ("rag_lab.", "sentence_transformers.", "peft.", "transformers.", "bm25s.",
                           "rank_bm25.", "faiss.")


def check_targets(node: Any, where: str = "") -> None:
    """Raise ``ConfigError`` for any ``_target_`` outside ``ALLOWED_TARGET_PREFIXES``."""
    if isinstance(node, Mapping):
        target = node.get("_target_")
        if target is not None and not str(target).startswith(ALLOWED_TARGET_PREFIXES):
            raise ConfigError(f"{where or '<root>'}._target_={target!r} is not allowed "
                              f"(allowed: {', '.join(p + '*' for p in ALLOWED_TARGET_PREFIXES)})")
        for k, v in node.items():
            check_targets(v, f"{where}.{k}" if where else str(k))
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node):
            check_targets(v, f"{where}[{i}]")


def instantiate(node: Any, where: str, **kwargs: Any) -> Any:
    from hydra.utils import instantiate as hydra_instantiate

    check_targets(node, where)
    try:
        return hydra_instantiate(node, _convert_="all", **kwargs)
    except Exception as exc:
        cause = exc
        while cause.__cause__ is not None:  # hydra wraps the constructor's own error
            cause = cause.__cause__
        if isinstance(cause, ConfigError):
            raise cause from None
        raise ConfigError(f"cannot build {where}: {type(cause).__name__}: {cause}") from exc


@dataclass
class Pipeline:
    """parse → chunk → retrieve (one or more) → fuse → rerank. Generation comes later.

    ``retrieve_k`` is how many chunks each retriever returns and fusion keeps per query.
    """

    parser: Parser
    chunker: Chunker
    retrievers: dict[str, Retriever]
    fusion: Fusion | None = None
    reranker: Reranker | None = None
    retrieve_k: int = 100
    chunks: dict[str, Chunk] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def index(self, documents: Sequence[Document]) -> list[Chunk]:
        t0 = time.perf_counter()
        chunks = self.chunker.chunk(documents)
        t1 = time.perf_counter()
        if not chunks:
            raise ConfigError("the chunker produced no chunks")
        self.chunks = {c.chunk_id: c for c in chunks}
        if len(self.chunks) != len(chunks):
            raise ConfigError("the chunker produced duplicate chunk ids")
        for name, retriever in self.retrievers.items():
            retriever.index(chunks)
            log.info("indexed %d chunks with %s: %s", len(chunks), name,
                     {k: round(v, 3) for k, v in retriever.stats.items()})
        self.timings = {"chunk_seconds": t1 - t0, "index_seconds": time.perf_counter() - t0}
        return chunks

    def retrieve(self, queries: Mapping[str, str], k: int | None = None) -> tuple[Run, dict[str, Run]]:
        """Final run and the per-retriever runs it was fused from."""
        k = k or self.retrieve_k
        runs = {name: r.retrieve(queries, k) for name, r in self.retrievers.items()}
        if len(runs) == 1:
            final = next(iter(runs.values()))
        else:
            if self.fusion is None:
                raise ConfigError(f"{len(runs)} retrievers ({', '.join(runs)}) need a fusion method")
            final = self.fusion.fuse(runs, k)
        if self.reranker is not None:
            final = self.reranker.rerank(queries, final, self.chunks)
        return final, runs


def build_pipeline(cfg: DictConfig) -> Pipeline:
    """Instantiate every stage named by ``cfg`` (the primary ``evaluate`` config)."""
    if not cfg.get("retrievers"):
        raise ConfigError("no retriever selected: set retrievers=[bm25], [dense] or [dense,bm25]")
    parser = instantiate(cfg.parser, "parser")
    chunker = instantiate(cfg.chunker, "chunker")
    # a dense retriever's `embedder: ${embedder}` (and a stage's `tokenizer: ${tokenizer}`) are
    # interpolations, so overriding the top-level group changes every stage that uses it.
    retrievers: dict[str, Retriever] = {
        name: instantiate(rcfg, f"retrievers.{name}") for name, rcfg in cfg.retrievers.items() if rcfg is not None
    }
    fusion = instantiate(cfg.fusion, "fusion") if cfg.get("fusion") and len(retrievers) > 1 else None
    reranker = instantiate(cfg.reranker, "reranker") if cfg.get("reranker") else None
    pipe = Pipeline(parser, chunker, retrievers, fusion, reranker, int(cfg.evaluation.retrieve_k))
    log.info("pipeline: parser=%s chunker=%s retrievers=%s fusion=%s reranker=%s",
             type(parser).__name__, type(chunker).__name__,
             {n: type(r).__name__ for n, r in retrievers.items()},
             type(fusion).__name__ if fusion else None, type(reranker).__name__ if reranker else None)
    return pipe
