"""The pipeline: an ordered list of stages, each behind one protocol, over one corpus.

    corpus side (``corpus``):  files → parse → contract → chunk
    indexes (``index``):       each retriever's index over the chunks
    query side (``query``):    query transforms → retrievers → fusion → post-processors

``Pipeline.run(queries)`` returns a frozen ``RetrievalResult``: every stage's run, the final run,
per-query latencies, which runs came from the cache and each stage's stats. The pipeline wires
the stages together: it hands each ``CacheAware`` stage a view of its cache namespace, fits each
``CorpusFitted`` stage when the corpus is set, and hands each ``QueryMetadataAware`` stage the
metadata fields it declares before a run (``rag_lab.protocols``). Stages are built by
``rag_lab.pipeline.build``; a fallback chain wraps pipelines (``rag_lab.pipeline.fallback``); the
answer stage (context → generator → judge) is ``rag_lab.pipeline.answers``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rag_lab.access import AccessPolicy
from rag_lab.cache import StageCache, diff_stats
from rag_lab.chunker.base import Chunker
from rag_lab.contract.base import Contract
from rag_lab.errors import ConfigError
from rag_lab.fusion.base import Fusion, Weighted
from rag_lab.parser.base import Parser
from rag_lab.pipeline.corpus import CorpusLoader
from rag_lab.pipeline.edits import ChunkDiff
from rag_lab.pipeline.index import Indexes
from rag_lab.pipeline.query import QuerySide
from rag_lab.pipeline.result import RetrievalResult
from rag_lab.postprocess.base import PostProcessor
from rag_lab.protocols import (
    Annotating,
    CacheAware,
    CorpusFitted,
    Measured,
    QueryMetadataAware,
    implements,
)
from rag_lab.query_transforms.base import QueryTransform
from rag_lab.retrievers.base import Retriever
from rag_lab.types import Chunk, Run
from rag_lab.validate import OptionError, integer


def _stats(name: str, stage: object) -> dict[str, float]:
    return (
        {f"{name}/{k}": float(v) for k, v in stage.stats.items()}
        if implements(stage, Measured)
        else {}
    )


@dataclass
class Pipeline:
    """The stages, in order, and the corpus they index.

    ``retrieve_k`` is how many chunks each retriever returns and fusion keeps per query (the
    config's ``evaluation.retrieve_k``). ``stage_configs`` are the resolved config subtrees that
    key the stage cache (``cache``, when set): parsed documents, chunks, each retriever's index
    and run are read back instead of recomputed when nothing upstream changed."""

    parser: Parser
    chunker: Chunker
    retrievers: dict[str, Retriever]
    fusion: Fusion | None = None
    postprocessors: dict[str, PostProcessor] = field(default_factory=dict)
    query_transforms: dict[str, QueryTransform] = field(default_factory=dict)
    retrieve_k: int = 100
    cache: StageCache | None = None
    stage_configs: dict[str, Any] = field(default_factory=dict)
    contract: Contract | None = None
    on_parse_error: str = "fail"
    # who may read what (the `permissions` group): enforced inside retrieval, see QuerySide
    access: AccessPolicy | None = None
    # the corpus, once set (load_corpus, set_chunks, restore)
    chunks: dict[str, Chunk] = field(default_factory=dict, init=False)
    chunks_key: str = field(default="", init=False)
    corpus_warnings: list[str] = field(default_factory=list, init=False)
    ingest: dict[str, Any] = field(default_factory=dict, init=False)
    corpus_counts: dict[str, float] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        try:
            self.retrieve_k = integer(self.retrieve_k, "retrieve_k", ge=1)
        except OptionError as exc:
            raise exc.at("evaluation") from None
        if isinstance(self.fusion, Weighted) and len(self.retrievers) > 1:
            unknown = sorted(set(self.fusion.weights) - set(self.retrievers))
            if unknown:  # refused before anything is indexed or retrieved
                raise ConfigError(
                    f"fusion.weights names {', '.join(unknown)}, not a retriever of this pipeline"
                    f" (retrievers: {', '.join(self.retrievers)}; drop the weight or add it to "
                    "retrievers=[...])"
                )
        self._corpus_seconds: dict[str, float] = {}
        # stages keep a run's per-query state (metadata, annotations, stats): one run at a time
        self._lock = threading.RLock()
        self._cache_start = self.cache.stats() if self.cache is not None else {}
        self.corpus_loader = CorpusLoader(
            self.parser,
            self.chunker,
            self.contract,
            self.on_parse_error,
            self.cache,
            self.stage_configs,
        )
        retriever_configs = self.stage_configs.get("retrievers") or {}
        self.indexes = Indexes(self.retrievers, self.cache, retriever_configs)
        self.query_side = QuerySide(
            self.retrievers,
            self.indexes,
            self.fusion,
            self.postprocessors,
            self.query_transforms,
            self.cache,
            retriever_configs,
            self.access,
        )
        if self.cache is not None:
            for stage in self._stages():
                if isinstance(stage, CacheAware):
                    stage.attach_cache(self.cache.view(stage.cache_namespace))

    def _stages(self) -> list[object]:
        """Every query-time stage, in pipeline order (transforms, retrievers, fusion, post)."""
        fusion = [self.fusion] if self.fusion is not None else []
        return [
            *self.query_transforms.values(),
            *self.retrievers.values(),
            *fusion,
            *self.postprocessors.values(),
        ]

    @property
    def reranker(self) -> PostProcessor | None:
        """The ``reranker`` group's stage (the first post-processor), if configured."""
        return self.postprocessors.get("reranker")

    @property
    def timings(self) -> dict[str, float]:
        """``parse_seconds``, ``chunk_seconds`` of the corpus and ``<retriever>/index_seconds``
        of each index built or restored."""
        return {**self._corpus_seconds, **self.indexes.seconds}

    def cache_counters(self) -> dict[str, float]:
        """What this pipeline read from and wrote to the stage cache since it was built (``{}``
        without a cache): totals and ``cache/<namespace>/hits|misses``."""
        if self.cache is None:
            return {}
        return diff_stats(self.cache.stats(), self._cache_start)

    # -- corpus ----------------------------------------------------------------------------------
    def load_corpus(
        self,
        sources: Sequence[Path],
        root: Path,
        corpus_fingerprint: str,
        on_empty: str = "skip",
        left_out: Sequence[tuple[str, str]] = (),
    ) -> list[Chunk]:
        """Parse, check and chunk the corpus (``rag_lab.pipeline.corpus``: each step read from
        the cache when its key hits) and make it this pipeline's. ``left_out``: the corpus
        folder's entries not read (``LabelledQueries.corpus_left_out``), counted."""
        loaded = self.corpus_loader.load(sources, root, corpus_fingerprint, on_empty, left_out)
        self.corpus_warnings = list(loaded.warnings)
        self.ingest = dict(loaded.ingest)
        self._corpus_seconds = {
            "parse_seconds": loaded.seconds["parse"],
            "chunk_seconds": loaded.seconds["chunk"],
        }
        # what the read computed rather than read back: an edit parses its files and completes
        # (contract) and tags only the documents and chunks it changed
        self.corpus_counts = {
            f"cache/corpus/n_{k}": float(v) for k, v in self.corpus_loader.counts.items()
        }
        self.set_chunks(loaded.chunks, loaded.key, loaded.diff)
        return list(loaded.chunks)

    def set_chunks(
        self,
        chunks: Sequence[Chunk],
        key: str = "",
        diff: Callable[[], ChunkDiff | None] | None = None,
    ) -> None:
        """Make ``chunks`` the corpus (``key``: their cache key, which every cached index and run
        hangs from; ``""``: nothing downstream is cached); every retriever is indexed again, or
        updated in place from the chunk set an edit (``diff``) started from."""
        if not chunks:
            raise ConfigError("the chunker produced no chunks")
        self.chunks = {c.chunk_id: c for c in chunks}
        if len(self.chunks) != len(chunks):
            raise ConfigError("the chunker produced duplicate chunk ids")
        self.chunks_key = key
        self.indexes.set_corpus(self.chunks, key, diff)
        for stage in self._stages():
            if isinstance(stage, CorpusFitted):  # e.g. abbreviations mined from the corpus
                stage.fit(list(chunks))

    @property
    def all_chunks(self) -> dict[str, Chunk]:
        """Every chunk a run can return (scoring, attribution and answers read these)."""
        return dict(self.chunks)

    def restore(self, chunks: Sequence[Chunk], index_dirs: Mapping[str, Path]) -> None:
        """Set the corpus and load every retriever's saved index (an export, a server): nothing is
        encoded (``Indexes.restore``)."""
        self.set_chunks(chunks)
        self.indexes.restore(index_dirs)

    def index_all(self) -> None:
        """Index (or restore from the cache) every retriever over the current chunks."""
        self.indexes.ensure_all()

    # -- retrieval -------------------------------------------------------------------------------
    def set_query_metadata(self, metadata: Mapping[str, Mapping[str, Any]] | None) -> None:
        """Hand every ``QueryMetadataAware`` stage the fields it declares of each query's
        metadata (``{}`` for a query without them; every stage is called, so nothing of an earlier
        run's metadata is left behind)."""
        self.query_side.metadata = {q: dict(m) for q, m in (metadata or {}).items()}
        for stage in self._stages():
            if implements(stage, QueryMetadataAware):
                stage.set_query_metadata(self.query_side.declared(stage))

    def run(
        self,
        queries: Mapping[str, str],
        k: int | None = None,
        latency_queries: int = 0,
        query_metadata: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> RetrievalResult:
        """Every retrieval stage over ``queries`` (``{query_id: text}``) at depth ``k``
        (default ``retrieve_k``); see ``RetrievalResult``.
        ``query_metadata``: each query's metadata (``Query.metadata``), of which
        ``QueryMetadataAware`` stages see the fields they declare (``as_of``). Safe to call from
        several threads: runs of one pipeline take turns (its stages keep a run's state)."""
        with self._lock:
            return self._run(queries, k, latency_queries, query_metadata)

    def _run(
        self,
        queries: Mapping[str, str],
        k: int | None,
        latency_queries: int,
        query_metadata: Mapping[str, Mapping[str, Any]] | None,
    ) -> RetrievalResult:
        k = int(k or self.retrieve_k)
        side = self.query_side
        self.set_query_metadata(query_metadata)
        side.access_stats = {}
        side.row_stats = {}
        seconds: dict[str, float] = {}
        windows: dict[str, tuple[int, int]] = {}  # each stage's batch, wall clock (ns)
        t0, w0 = time.perf_counter(), time.time_ns()
        transformed = side.transform(queries)
        variants = {name: side.variants(transformed, name) for name in self.retrievers}
        seconds["query_transforms"] = time.perf_counter() - t0
        windows["query_transforms"] = (w0, time.time_ns())
        runs: dict[str, Run] = {}
        latencies: dict[str, list[float]] = {}
        from_cache: dict[str, bool] = {}
        for name in self.retrievers:
            t1, w1 = time.perf_counter(), time.time_ns()
            indexing = self.indexes.spent
            runs[name], latencies[name], from_cache[name] = side.retrieve(
                name, transformed, variants[name], k, latency_queries
            )
            # an index built (or updated) on the way is its index_seconds, not retrieval
            seconds[name] = time.perf_counter() - t1 - (self.indexes.spent - indexing)
            windows[name] = (w1, time.time_ns())
        t2 = time.perf_counter()
        later, later_windows = side.after_retrieval(transformed, runs, k)
        seconds["after_retrieval"] = time.perf_counter() - t2
        windows.update(later_windows)
        # a query's latency: its transforms, every retriever in turn (as the pipeline runs them),
        # plus its share of the batch's fusion and post-processing
        n = max(len(queries), 1)
        shared = 1000 * (seconds["query_transforms"] + seconds["after_retrieval"]) / n
        timed = min((len(v) for v in latencies.values()), default=0)
        latency = tuple(
            sum(latencies[r][i] for r in self.retrievers) + shared for i in range(timed)
        )
        stats: dict[str, float] = {}
        for name, stage in [
            *self.query_transforms.items(),
            *self.retrievers.items(),
            *([("fusion", self.fusion)] if "fusion" in later else []),
            *self.postprocessors.items(),
        ]:
            stats.update(_stats(name, stage))
        stats.update({f"access/{n}": v for n, v in side.access_stats.items()})
        # queries each retriever searched, and rows it carried over an edit of the corpus
        for name, counts in side.row_stats.items():
            stats.update({f"cache/{name}/n_{what}": float(n) for what, n in counts.items()})
        all_runs = {**runs, **later}
        notes: dict[str, dict[str, Any]] = {}
        for stage in [*self.retrievers.values(), *self.postprocessors.values()]:
            if implements(stage, Annotating):  # an adapter retriever's unmapped sources too
                for qid, ann in stage.annotations.items():
                    notes.setdefault(qid, {}).update(ann)
        return RetrievalResult(
            MappingProxyType(transformed),
            MappingProxyType(all_runs),
            list(all_runs.values())[-1],
            latency,
            MappingProxyType(from_cache),
            MappingProxyType(seconds),
            MappingProxyType(stats),
            annotations=MappingProxyType(notes),
            windows=MappingProxyType(windows),
            retriever_ms=MappingProxyType({r: tuple(v) for r, v in latencies.items()}),
        )

    def retrieve(
        self, queries: Mapping[str, str], k: int | None = None
    ) -> tuple[Run, dict[str, Run]]:
        """Final run and the per-retriever runs it was fused from (``run`` without latencies)."""
        result = self.run(queries, k)
        return result.final, {n: result.runs[n] for n in self.retrievers}
