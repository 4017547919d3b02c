"""Several knowledge sources in one run, routed per query.

Each source (manuals, maintenance tickets, standards, ...) is a sub-pipeline with its own corpus,
parser, chunker and indexes (``conf/sources/``; built by ``rag_lab.pipeline.build.build_sources``);
a router (``rag_lab.sources``: rules first) picks the sources of each query; the runs of the
sources it picked are merged into the query's run. The agent of the articles "calls different RAG
instances": a source is one such instance.

Every source runs over the whole query set through its own stage cache (a sweep over the router
re-runs no retriever), and a query keeps only the runs of its sources: what it returns, its
latency (the sum of its sources' latencies) and what its annotations say come from those alone.
Each stage the sources share (``bm25``, ``dense``, ``fusion``, the post-processors: the same
stages when a source keeps the main ones) is merged the same way, so miss attribution still reads
the runs as a chain of stages; the merged final run comes last (``sources``). ``RetrievalResult``
carries each query's route and sources (``routes``) and each source's own run over every query
(``source_runs``: per-source hit rates, ``rag_lab.metrics.routing``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from rag_lab.cache.fingerprints import fingerprint
from rag_lab.errors import ConfigError
from rag_lab.fusion.rrf import RRFFusion
from rag_lab.io.files import CorpusFolder, list_corpus_folder
from rag_lab.pipeline.fallback import FallbackPipeline
from rag_lab.pipeline.pipeline import Pipeline
from rag_lab.pipeline.result import RetrievalResult
from rag_lab.protocols import CacheAware, Measured, implements
from rag_lab.ranking import top_k
from rag_lab.sources.base import Routing, SourceRouter
from rag_lab.validate import OptionError, choice, number

if TYPE_CHECKING:
    from rag_lab.types import Chunk, Run

MERGES = ("rrf", "raw")
MERGED = "sources"  # the stage name of the merged final run


@dataclass
class Source:
    """One named source: its pipeline, its corpus folder (``None``: the main corpus folder) and
    the ``include`` patterns that pick its files there (fnmatch on the path relative to the
    folder, ``*`` crossing folders; empty: every file)."""

    name: str
    pipeline: Pipeline
    corpus: Path | None = None
    include: tuple[str, ...] = ()

    def files(self, listed: Sequence[Path], root: Path) -> list[Path]:
        if not self.include:
            return list(listed)
        out = []
        for path in listed:
            try:
                rel = Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
            except ValueError:
                rel = Path(path).name
            if any(fnmatch.fnmatch(rel, p) for p in self.include):
                out.append(path)
        return out


@dataclass
class Merge:
    """How the runs of a query's sources become one: ``rrf`` (``Σ_s w_s / (k + rank_s)``; scale
    free, a single source keeps its order) or ``raw`` (each chunk keeps its source's score: for
    sources whose scores share a scale). ``weights``: source name → weight (missing: 1).
    ``route_weights``: route → {source: weight}, for the queries of that route in place of
    ``weights``; a route of several rules (``equipment+history``) takes its own entry when there
    is one, else, per source, the first of its rules (in rule order) that weighs that source."""

    method: str = "rrf"
    k: float = 60.0
    weights: Mapping[str, float] = field(default_factory=dict)
    route_weights: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        choice(self.method, "method", MERGES)
        number(self.k, "k", ge=0)
        for name, w in self.weights.items():
            number(w, f"weights.{name}", ge=0)
        if not isinstance(self.route_weights, Mapping):
            raise OptionError("route_weights", self.route_weights, "must map routes to weights")
        for route, table in self.route_weights.items():
            if not isinstance(table, Mapping):
                raise OptionError(f"route_weights.{route}", table, "must map sources to weights")
            for name, w in table.items():
                number(w, f"route_weights.{route}.{name}", ge=0)

    def source_names(self) -> set[str]:
        """Every source a weight names."""
        return set(self.weights) | {s for t in self.route_weights.values() for s in t}

    def weights_for(self, routing: Routing) -> dict[str, float]:
        """Each of ``routing``'s sources' weight for its route (see the class docstring)."""
        tables = [self.route_weights[routing.route]] if routing.route in self.route_weights else []
        tables += [
            self.route_weights[r] for r in routing.route.split("+") if r in self.route_weights
        ]
        out = {}
        for s in routing.sources:
            found = [t[s] for t in tables if s in t]
            out[s] = float(found[0] if found else self.weights.get(s, 1.0))
        return out

    def merge(self, runs: Mapping[str, Run], routes: Mapping[str, Routing], k: int) -> Run:
        """Each query's run from the runs of its routed sources (``runs``: source → run)."""
        if self.method == "rrf" and self.route_weights:  # queries fused in groups of one weighing
            groups: dict[tuple[tuple[str, float], ...], dict[str, Routing]] = {}
            for qid, r in routes.items():
                key = tuple(sorted(self.weights_for(r).items()))
                groups.setdefault(key, {})[qid] = r
            out: Run = {}
            for key, members in groups.items():
                out.update(self._rrf(runs, members, k, dict(key)))
            return {q: out[q] for q in routes}
        if self.method == "rrf":
            return self._rrf(runs, routes, k, {s: float(w) for s, w in self.weights.items()})
        out = {}
        for qid, r in routes.items():
            acc: dict[str, float] = {}
            weights = self.weights_for(r)
            for s in r.sources:
                acc.update({c: weights[s] * v for c, v in runs.get(s, {}).get(qid, {}).items()})
            out[qid] = top_k(acc, k)
        return out

    def _rrf(
        self,
        runs: Mapping[str, Run],
        routes: Mapping[str, Routing],
        k: int,
        weights: dict[str, float],
    ) -> Run:
        parts = {
            s: {q: run[q] for q, r in routes.items() if s in r.sources and q in run}
            for s, run in runs.items()
        }
        used = {s: w for s, w in weights.items() if s in parts}
        fused = RRFFusion(self.k, used).fuse(parts, k)
        return {q: fused.get(q, {}) for q in routes}


@dataclass
class SourcesPipeline(Pipeline):
    """A pipeline over named sources: ``load_corpus`` loads the main corpus (its chunks are not
    searched) and each source's; ``run`` routes each query and merges its sources' runs."""

    router: SourceRouter | None = None
    sources: list[Source] = field(default_factory=list)
    merging: Merge = field(default_factory=Merge)
    keep_raw: bool = field(default=False, init=False)  # raw_runs too (a fallback chain reads them)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.router is None or not self.sources:
            raise ConfigError("sources: a sources pipeline needs a router and at least one source")
        names = [s.name for s in self.sources]
        unknown = sorted(self.router.names() - set(names))
        if unknown:
            raise ConfigError(
                f"sources: the router names {', '.join(unknown)}, not a source of the run "
                f"(sources: {', '.join(names)})"
            )
        bad = sorted(self.merging.source_names() - set(names))
        if bad:
            raise ConfigError(f"sources.merge: weights of {', '.join(bad)}, not a source")
        known = self.router.routes()
        for route in self.merging.route_weights:
            if not set(str(route).split("+")) <= known:
                raise ConfigError(
                    f"sources.merge.route_weights.{route}: not a route of the router "
                    f"(routes: {', '.join(sorted(known))}; several rules join with +)"
                )
        if self.cache is not None and isinstance(self.router, CacheAware):  # an LLM router
            self.router.attach_cache(self.cache.view(self.router.cache_namespace))

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.sources]

    def load_corpus(
        self,
        sources: Sequence[Path],
        root: Path,
        corpus_fingerprint: str,
        on_empty: str = "skip",
        left_out: Sequence[tuple[str, str]] = (),
    ) -> list[Chunk]:
        super().load_corpus(sources, root, corpus_fingerprint, on_empty, left_out)
        owner: dict[str, str] = {}
        for source in self.sources:
            where = f"sources.corpora.{source.name}"
            if source.corpus is None:
                folder, listed, gone = Path(root), list(sources), list(left_out)
            else:
                folder = Path(source.corpus)
                listing = list_corpus_folder(folder) if folder.is_dir() else CorpusFolder(())
                listed = list(listing.files)
                gone = [(str(p), why) for p, why in listing.left_out]
            files = source.files(listed, folder)
            if not files:
                pats = f" matching {', '.join(source.include)}" if source.include else ""
                raise ConfigError(f"{where}: no files{pats} in {folder}")
            source.pipeline.load_corpus(
                files, folder, fingerprint(files, root=folder), on_empty, gone
            )
            for cid in source.pipeline.chunks:
                if cid in owner:
                    raise ConfigError(
                        f"{where}: chunk id {cid} is also in source {owner[cid]}: a document "
                        "must belong to one source (its include patterns overlap)"
                    )
                owner[cid] = source.name
        return list(self.all_chunks.values())

    @property
    def all_chunks(self) -> dict[str, Chunk]:
        """Every source's chunks (what a run can return)."""
        out: dict[str, Chunk] = {}
        for source in self.sources:
            out.update(source.pipeline.chunks)
        return out

    def doc_sources(self) -> dict[str, str]:
        """Document id → the source holding it."""
        return {c.doc_id: s.name for s in self.sources for c in s.pipeline.chunks.values()}

    def searched_at(self, level: int, routed: tuple[str, ...]) -> tuple[str, ...]:
        """What a query's returned run was searched in, given the fallback ``level`` that answered
        it and its ``routed`` sources: without a chain, always the routed sources."""
        return routed

    @property
    def timings(self) -> dict[str, float]:
        """The corpus and index timings summed over the sources (the main corpus is loaded but
        never indexed)."""
        out: dict[str, float] = {}
        for source in self.sources:
            for key, v in source.pipeline.timings.items():
                out[key] = out.get(key, 0.0) + v
        return out

    def index_all(self) -> None:
        for source in self.sources:
            source.pipeline.index_all()

    def restore(
        self,
        chunks: Sequence[Chunk],
        index_dirs: Mapping[str, Path],
        *,
        sources: Mapping[str, tuple[Sequence[Chunk], Mapping[str, Path]]] | None = None,
    ) -> None:
        """Each source's chunks and index folders (``sources[name]``; an export carries them),
        then ``chunks`` as the main corpus: every source's chunks, what a run can return. The
        main retrievers are never searched, so ``index_dirs`` is not read. ``ConfigError`` when a
        source has nothing saved, something saved is no source of the config, a source's index
        does not match its chunks or two sources hold the same chunk id."""
        saved = dict(sources or {})
        for name in self.names:
            if name not in saved:
                raise ConfigError(f"sources.corpora.{name}: no saved corpus or indexes")
        extra = sorted(set(saved) - set(self.names))
        if extra:
            raise ConfigError(f"sources: {', '.join(extra)} saved, but not a source of the config")
        owner: dict[str, str] = {}
        for source in self.sources:
            own, dirs = saved[source.name]
            try:
                source.pipeline.restore(own, dirs)
            except ConfigError as exc:
                raise ConfigError(f"sources.corpora.{source.name}: {exc}") from None
            for cid in source.pipeline.chunks:
                if cid in owner:
                    raise ConfigError(
                        f"sources.corpora.{source.name}: chunk id {cid} is also in source "
                        f"{owner[cid]}"
                    )
                owner[cid] = source.name
        if set(owner) != {c.chunk_id for c in chunks}:
            raise ConfigError("sources: the saved chunks are not the sources' chunks")
        self.set_chunks(chunks)  # never indexed: the sources are searched, not the main corpus

    def _run(
        self,
        queries: Mapping[str, str],
        k: int | None,
        latency_queries: int,
        query_metadata: Mapping[str, Mapping[str, Any]] | None,
    ) -> RetrievalResult:
        assert self.router is not None
        k = int(k or self.retrieve_k)
        meta = query_metadata or {}
        t0, w0 = time.perf_counter(), time.time_ns()
        routes = {q: self.router.route(t, meta.get(q, {}), self.names) for q, t in queries.items()}
        route_seconds = time.perf_counter() - t0
        results = {
            s.name: s.pipeline.run(queries, k, latency_queries, query_metadata)
            for s in self.sources
        }
        first = results[self.names[0]]
        shared = [n for n in first.runs if all(n in r.runs for r in results.values())]
        t1 = time.perf_counter()
        runs: dict[str, Run] = {
            n: self.merging.merge({s: r.runs[n] for s, r in results.items()}, routes, k)
            for n in shared
        }
        runs[MERGED] = self.merging.merge({s: r.final for s, r in results.items()}, routes, k)
        raw: dict[str, Run] = {}
        if self.keep_raw:  # a fallback chain judges each stage in its sources' own scores
            plain = Merge(method="raw")
            raw = {
                n: plain.merge({s: r.runs[n] for s, r in results.items()}, routes, k)
                for n in shared
            }
        merge_seconds = time.perf_counter() - t1
        n = max(len(queries), 1)
        overhead = 1000 * (route_seconds + merge_seconds) / n
        qids = list(queries)
        timed = min((len(r.latency_ms) for r in results.values()), default=0)
        latency = tuple(
            sum(results[s].latency_ms[i] for s in routes[qids[i]].sources) + overhead
            for i in range(timed)
        )
        stats: dict[str, float] = {}
        counts: dict[str, int] = {}
        for routing in routes.values():
            counts[routing.route] = counts.get(routing.route, 0) + 1
        stats.update({f"routing/share/{c}": v / n for c, v in counts.items()})
        stats["routing/ms_per_query"] = 1000 * route_seconds / n
        if implements(self.router, Measured):  # an LLM router's calls, cache hits, tokens
            stats.update({f"routing/{k}": float(v) for k, v in self.router.stats.items()})
        for s, r in results.items():
            stats.update({f"sources/{s}/{key}": v for key, v in r.stats.items()})
        # each stage's wall time summed over the sources (what ``runtime_metrics`` reads), then each
        # source's whole run, the routing and the merge
        seconds: dict[str, float] = {}
        for r in results.values():
            for key, v in r.seconds.items():
                seconds[key] = seconds.get(key, 0.0) + v
        seconds.update({f"sources/{s}": sum(r.seconds.values()) for s, r in results.items()})
        seconds.update(routing=route_seconds, merge=merge_seconds)
        from_cache = {
            name: all(r.from_cache.get(name, True) for r in results.values())
            for r0 in results.values()
            for name in r0.from_cache
        }
        from_cache.update(
            {f"{s}/{name}": v for s, r in results.items() for name, v in r.from_cache.items()}
        )
        notes: dict[str, dict[str, Any]] = {}
        for qid, routing in routes.items():
            for s in routing.sources:
                notes.setdefault(qid, {}).update(results[s].annotations.get(qid, {}))
        windows = {
            name: (min(w[0] for w in spans), max(w[1] for w in spans))
            for name in [*first.windows]
            if (spans := [r.windows[name] for r in results.values() if name in r.windows])
        }
        windows[MERGED] = (w0, time.time_ns())
        retriever_ms = {
            name: tuple(
                sum(
                    results[s].retriever_ms[name][i]
                    for s in routes[qids[i]].sources
                    if name in results[s].retriever_ms and i < len(results[s].retriever_ms[name])
                )
                for i in range(timed)
            )
            for name in first.retriever_ms
        }
        return RetrievalResult(
            first.queries,
            MappingProxyType(runs),
            runs[MERGED],
            latency,
            MappingProxyType(from_cache),
            MappingProxyType(seconds),
            MappingProxyType(stats),
            annotations=MappingProxyType({q: v for q, v in notes.items() if v}),
            windows=MappingProxyType(windows),
            retriever_ms=MappingProxyType(retriever_ms),
            routes=MappingProxyType(routes),
            source_runs=MappingProxyType({s: r.final for s, r in results.items()}),
            raw_runs=MappingProxyType(raw),
        )


@dataclass
class RoutedFallbackPipeline(FallbackPipeline, SourcesPipeline):
    """Routed sources with a fallback chain after them (``sources=...`` with ``fallback=...``).

    Level 0 is the routed run: each query searched in its routed sources, merged. Its acceptance
    judges a stage (``accept.stage``: ``bm25``) by each chunk's score in its own source
    (``raw_runs``: a raw threshold keeps its units whatever the merge), and ``stage: null`` the
    merged run. A query level 0 refuses goes down the chain like any other: a level without its
    own corpus searches every source's chunks (the routing dropped: what the query's sources
    missed may be in another), a level with its own corpus searches that (a chunk id it shares
    with a source must be the same chunk: a level over a source's own folder is allowed). Level
    0 cannot be judged on a retriever the sources lack (no probe: refused)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        assert self.chain is not None
        if self.chain.probe is not None:
            raise ConfigError(
                f"fallback.accept.stage: {self.chain.accept.stage} is not a retriever of the "
                "sources: with sources=..., level 0 judges a stage the sources run (or null)"
            )
        self.keep_raw = True

    def searched_corpus(self) -> tuple[dict[str, Chunk], str]:
        chunks: dict[str, Chunk] = {}
        for source in self.sources:
            chunks.update(source.pipeline.chunks)
        keys = [s.pipeline.chunks_key for s in self.sources]
        # the cache key of the union: its sources' keys (none when one is uncached)
        key = hashlib.sha256("+".join(keys).encode()).hexdigest()[:32] if all(keys) else ""
        return chunks, key

    def searched_at(self, level: int, routed: tuple[str, ...]) -> tuple[str, ...]:
        """Level 0: the routed sources; a level without its own corpus: every source; a level
        with one: ``fallback:<level>``; refused (no level answered): nothing."""
        if level == 0:
            return routed
        if level > len(self.levels):
            return ()
        chosen = self.levels[level - 1]
        if chosen.corpus is None:
            return tuple(s.name for s in self.sources)
        return (f"fallback:{chosen.name}",)

    def clashes(self, chunks: Mapping[str, Chunk]) -> list[str]:
        searched = self.searched_corpus()[0]
        return sorted(c for c in set(chunks) & set(searched) if chunks[c] != searched[c])

    def judged(
        self,
        result: RetrievalResult,
        queries: Mapping[str, str],
        k: int,
        query_metadata: Mapping[str, Mapping[str, Any]] | None,
    ) -> RetrievalResult:
        return replace(result, runs=MappingProxyType({**result.runs, **result.raw_runs}))
