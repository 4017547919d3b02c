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
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rag_lab.cache import StageCache, open_cache, stage_key
from rag_lab.chunker.base import Chunker
from rag_lab.errors import ConfigError
from rag_lab.fusion.base import Fusion
from rag_lab.parser.base import Parser, parse_corpus
from rag_lab.reranker.base import Reranker
from rag_lab.retrievers.base import PersistentRetriever, Retriever
from rag_lab.types import (
    Chunk,
    Document,
    Run,
    chunk_from_dict,
    chunk_to_dict,
    document_from_dict,
    document_to_dict,
)

log = logging.getLogger(__name__)

# Packages whose classes a config may name: rag_lab itself and the libraries it wraps.
ALLOWED_TARGET_PREFIXES = ("rag_lab.", "sentence_transformers.", "peft.", "transformers.", "bm25s.",
                           "rank_bm25.", "faiss.")


def check_targets(node: Any, where: str = "") -> None:
    """Raise ``ConfigError`` unless every ``_target_`` in ``node`` names a *class* defined under
    ``ALLOWED_TARGET_PREFIXES``.

    The name alone is not enough: Hydra resolves dotted paths through a module's imports, so
    ``rag_lab.pipeline.Path.write_text`` starts with an allowed prefix yet is ``pathlib``'s
    function. Every stage is a class, so targets must resolve to one, defined in an allowed package."""
    if isinstance(node, Mapping):
        target = node.get("_target_")
        if target is not None:
            here = f"{where or '<root>'}._target_={target!r}"
            if not str(target).startswith(ALLOWED_TARGET_PREFIXES):
                raise ConfigError(f"{here} is not allowed "
                                  f"(allowed: {', '.join(p + '*' for p in ALLOWED_TARGET_PREFIXES)})")
            from hydra.utils import get_class

            try:
                cls = get_class(str(target))
            except Exception as exc:
                raise ConfigError(f"{here} is not allowed: it does not name a class "
                                  f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") from None
            if not str(getattr(cls, "__module__", "")).startswith(ALLOWED_TARGET_PREFIXES):
                raise ConfigError(f"{here} is not allowed: it resolves to {cls.__module__}.{cls.__qualname__}, "
                                  "outside the allowed packages")
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
        cause: BaseException = exc
        while cause.__cause__ is not None:  # hydra wraps the constructor's own error
            cause = cause.__cause__
        if isinstance(cause, ConfigError):
            raise cause from None
        raise ConfigError(f"cannot build {where}: {type(cause).__name__}: {cause}") from exc


@dataclass
class Pipeline:
    """parse → chunk → retrieve (one or more) → fuse → rerank. Generation comes later.

    ``retrieve_k`` is how many chunks each retriever returns and fusion keeps per query.
    ``stage_configs`` are the resolved config subtrees that key the stage cache (``cache``, when
    set): parsed documents, chunks and each retriever's run are read back instead of recomputed
    when nothing upstream changed, and a retriever is indexed only when one of its runs misses.
    """

    parser: Parser
    chunker: Chunker
    retrievers: dict[str, Retriever]
    fusion: Fusion | None = None
    reranker: Reranker | None = None
    retrieve_k: int = 100
    cache: StageCache | None = None
    stage_configs: dict[str, Any] = field(default_factory=dict)
    chunks: dict[str, Chunk] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    chunks_key: str = ""
    _indexed: set[str] = field(default_factory=set)

    # -- parse + chunk ------------------------------------------------------------------------
    def load_corpus(self, sources: Sequence[Path], root: Path, corpus_fingerprint: str) -> list[Chunk]:
        """Parse and chunk the corpus (each step read from the cache when its key hits)."""
        t0 = time.perf_counter()
        docs_key = stage_key("documents", self.stage_configs.get("parser"), corpus_fingerprint)
        chunks_key = stage_key("chunks", self.stage_configs.get("chunker"), docs_key)
        cached = self.cache.get_json("chunks", chunks_key) if self.cache else None
        if cached is not None:
            chunks = [chunk_from_dict(c) for c in cached]
            self.timings.update(parse_seconds=0.0, chunk_seconds=time.perf_counter() - t0)
        else:
            docs_raw = self.cache.get_json("documents", docs_key) if self.cache else None
            if docs_raw is not None:
                docs = [document_from_dict(d) for d in docs_raw]
            else:
                docs = parse_corpus(self.parser, sources, root)
                if self.cache:
                    self.cache.put_json("documents", docs_key, [document_to_dict(d) for d in docs])
            t1 = time.perf_counter()
            chunks = self.chunker.chunk(docs)
            if self.cache and chunks:
                self.cache.put_json("chunks", chunks_key, [chunk_to_dict(c) for c in chunks])
            self.timings.update(parse_seconds=t1 - t0, chunk_seconds=time.perf_counter() - t1)
        self._set_chunks(chunks)
        self.chunks_key = chunks_key
        return chunks

    def _set_chunks(self, chunks: list[Chunk]) -> None:
        if not chunks:
            raise ConfigError("the chunker produced no chunks")
        self.chunks = {c.chunk_id: c for c in chunks}
        if len(self.chunks) != len(chunks):
            raise ConfigError("the chunker produced duplicate chunk ids")
        self._indexed = set()

    def index(self, documents: Sequence[Document]) -> list[Chunk]:
        """Chunk ``documents`` and index every retriever now (the serving path; no cache)."""
        t0 = time.perf_counter()
        chunks = self.chunker.chunk(documents)
        t1 = time.perf_counter()
        self._set_chunks(chunks)
        for name in self.retrievers:
            self._ensure_indexed(name)
        self.timings.update(chunk_seconds=t1 - t0, index_seconds=time.perf_counter() - t1)
        return chunks

    def index_key(self, name: str) -> str:
        retriever = self.retrievers[name]
        return stage_key("index", {"retriever": self.stage_configs.get("retrievers", {}).get(name),
                                   "identity": getattr(retriever, "identity", None)}, self.chunks_key)

    def _ensure_indexed(self, name: str) -> None:
        """Index retriever ``name`` over the current chunks: restored from the stage cache when the
        retriever can persist its index and the entry exists, built (and stored) otherwise."""
        if name in self._indexed:
            return
        retriever = self.retrievers[name]
        t0 = time.perf_counter()
        cache = self.cache if self.chunks_key and isinstance(retriever, PersistentRetriever) else None
        key = self.index_key(name) if cache is not None else ""
        entry = cache.get_dir("indexes", key) if cache is not None else None
        if entry is not None:
            retriever.load_index(entry)  # type: ignore[attr-defined]  # PersistentRetriever, checked above
        else:
            retriever.index(list(self.chunks.values()))
            if cache is not None:
                try:
                    cache.put_dir("indexes", key, retriever.save_index)  # type: ignore[attr-defined]
                except NotImplementedError:
                    pass
        self.timings[f"{name}/index_seconds"] = time.perf_counter() - t0
        self._indexed.add(name)
        log.info("indexed %d chunks with %s: %s", len(self.chunks), name,
                 {k: round(v, 3) for k, v in retriever.stats.items()})

    # -- retrieve ------------------------------------------------------------------------------
    def run_key(self, name: str, queries: Mapping[str, str], k: int) -> str:
        retriever = self.retrievers[name]
        return stage_key("run", {"retriever": self.stage_configs.get("retrievers", {}).get(name),
                                 "identity": getattr(retriever, "identity", None), "k": k},
                         self.chunks_key, stage_key("queries", sorted(queries.items())))

    def retriever_run(self, name: str, queries: Mapping[str, str], k: int,
                      latency_queries: int = 0) -> tuple[Run, list[float], bool]:
        """One retriever's run over ``queries`` (cached when possible), per-query latencies in ms
        measured one query at a time on the first ``latency_queries`` queries, and whether it
        came from the cache (then the latencies are those recorded when it was computed)."""
        cache = self.cache if self.chunks_key else None
        key = self.run_key(name, queries, k) if cache is not None else ""
        if cache is not None:
            entry = cache.get_json("runs", key)
            if entry is not None and len(entry["latency_ms"]) >= min(latency_queries, len(queries)):
                return entry["run"], entry["latency_ms"][:latency_queries], True
        self._ensure_indexed(name)
        retriever = self.retrievers[name]
        run = retriever.retrieve(queries, k)
        latencies = []
        for qid in list(queries)[:latency_queries]:
            t0 = time.perf_counter()
            retriever.retrieve({qid: queries[qid]}, k)
            latencies.append((time.perf_counter() - t0) * 1000)
        if cache is not None:
            cache.put_json("runs", key, {"run": run, "latency_ms": latencies})
        return run, latencies, False

    def combine(self, queries: Mapping[str, str], runs: Mapping[str, Run], k: int | None = None) -> Run:
        """Fuse per-retriever runs (a no-op for one) and rerank."""
        k = k or self.retrieve_k
        if len(runs) == 1:
            final = next(iter(runs.values()))
        else:
            if self.fusion is None:
                raise ConfigError(f"{len(runs)} retrievers ({', '.join(runs)}) need a fusion method")
            final = self.fusion.fuse(runs, k)
        if self.reranker is not None:
            final = self.reranker.rerank(queries, final, self.chunks)
        return final

    def retrieve(self, queries: Mapping[str, str], k: int | None = None) -> tuple[Run, dict[str, Run]]:
        """Final run and the per-retriever runs it was fused from (live indexes, no cache)."""
        k = k or self.retrieve_k
        runs = {}
        for name, r in self.retrievers.items():
            self._ensure_indexed(name)
            runs[name] = r.retrieve(queries, k)
        return self.combine(queries, runs, k), runs


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
    cache_dir = OmegaConf.select(cfg, "cache.dir", default=None)
    retriever_cfgs: dict[str, Any] = {}
    for n, c in cfg.retrievers.items():
        if c is not None:
            node: dict[str, Any] = OmegaConf.to_container(c, resolve=True)  # type: ignore[assignment]
            node.pop("cache_dir", None)  # where the cache lives does not change what is in it
            retriever_cfgs[str(n)] = node
    stage_configs = {
        "parser": OmegaConf.to_container(cfg.parser, resolve=True),
        "chunker": OmegaConf.to_container(cfg.chunker, resolve=True),
        "retrievers": retriever_cfgs,
    }
    pipe = Pipeline(parser, chunker, retrievers, fusion, reranker, int(cfg.evaluation.retrieve_k),
                    open_cache(cache_dir) if cache_dir else None, stage_configs)
    log.info("pipeline: parser=%s chunker=%s retrievers=%s fusion=%s reranker=%s",
             type(parser).__name__, type(chunker).__name__,
             {n: type(r).__name__ for n, r in retrievers.items()},
             type(fusion).__name__ if fusion else None, type(reranker).__name__ if reranker else None)
    return pipe
