"""The query side of a pipeline: query transforms → every retriever → fusion → post-processors.

A retriever's run is read back from the stage cache when nothing it depends on changed: the whole
run (``runs``, keyed by the retriever's config and identity, the depth, the chunks' key and the
query texts) or, query by query, its rows of the per-query table (``query_runs``), so a query set
that grew by one searches one query. A retriever is indexed (``Indexes.ensure``) only when some
query must actually be searched.

A ``QueryVariants`` transform (multi-query, HyDE) has a retriever run several texts per query;
each query's lists are fused by reciprocal rank (``VARIANT_RRF_K``).

Permissions (``access``, an ``AccessPolicy``): every retriever searches only the chunks the
query's principal may read — inside its index when it can (``FilteredRetriever``: BM25, faiss,
the vector stores), else over its whole ranking, filtered, then cut to ``k`` — and the run of
every stage after it (fusion, each post-processor) is checked again, so no stage order, cache
entry or foreign component returns a chunk the principal cannot read. Cached runs are keyed by
the principal. ``access_stats``: what the checks after the pre-filter caught (0 when every
stage behaves).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from rag_lab.access import PRINCIPAL_FIELD, AccessPolicy
from rag_lab.cache import StageCache, keys
from rag_lab.errors import ConfigError
from rag_lab.fusion.base import Fusion, QueryConditioned
from rag_lab.fusion.rrf import RRFFusion
from rag_lab.pipeline.index import Indexes, identity
from rag_lab.postprocess.base import PostProcessor
from rag_lab.protocols import CachesOwnRuns, QueryMetadataAware, implements
from rag_lab.query_transforms.base import QueryTransform, QueryVariants
from rag_lab.ranking import ranked
from rag_lab.retrievers.base import FilteredRetriever, IncrementalRetriever, Retriever
from rag_lab.types import Run

ALLOWED_MEMO = 1024  # principals whose readable chunk ids are remembered (then forgotten)
ACCESS_KEY = "~access"  # a cached run's per-query key field: what the principal may read

# reciprocal-rank offset fusing one retriever's lists over a query's variant texts (QueryVariants)
VARIANT_RRF_K = 60.0

# one retriever's output: its run, the per-query latencies (ms) of the timed queries, and
# whether the run was read back from the cache
RetrieverRun = tuple[Run, list[float], bool]


def _row(
    scores: Mapping[str, float], k: int, depth: int, floor: float | None = None
) -> dict[str, Any]:
    """A stored row: the run's ``k`` best (``run``), the rest of a deeper search (``more``) and
    the floor no chunk outside them scores above (``floor``: the last score of a full search,
    0.0 when it returned fewer than ``depth``, every chunk that scores at all)."""
    items = list(scores.items())
    if floor is None:
        floor = float(items[-1][1]) if len(items) >= depth and items else 0.0
    row: dict[str, Any] = {"run": dict(items[:k]), "floor": floor}
    if len(items) > k:
        row["more"] = dict(items[k:])
    return row


class QuerySide:
    """Transforms, retrievers, fusion and post-processors over one indexed corpus (``indexes``).

    ``configs`` are the retrievers' resolved configs (cache keys); ``metadata`` each query's
    metadata fields, as ``set_query_metadata`` received them."""

    def __init__(
        self,
        retrievers: Mapping[str, Retriever],
        indexes: Indexes,
        fusion: Fusion | None = None,
        postprocessors: Mapping[str, PostProcessor] | None = None,
        query_transforms: Mapping[str, QueryTransform] | None = None,
        cache: StageCache | None = None,
        configs: Mapping[str, Any] | None = None,
        access: AccessPolicy | None = None,
    ) -> None:
        self.retrievers = retrievers
        self.indexes = indexes
        self.fusion = fusion
        self.postprocessors = dict(postprocessors or {})
        self.query_transforms = dict(query_transforms or {})
        self.cache = cache
        self.configs = dict(configs or {})
        self.metadata: dict[str, dict[str, Any]] = {}
        self.access = access
        self.access_stats: dict[str, float] = {}
        self._allowed: dict[str, frozenset[str]] = {}
        self._allowed_for = -1
        # per retriever, of its last run: queries searched and rows carried over an edit
        self.row_stats: dict[str, dict[str, int]] = {}

    # -- permissions ------------------------------------------------------------------------------
    def principal(self, qid: str) -> Any:
        """The principal of query ``qid`` (a variant's id ``<qid>U+001F<i>`` is its query's)."""
        return self.metadata.get(qid.split("\x1f", 1)[0], {}).get(PRINCIPAL_FIELD)

    def allowed(self, qid: str) -> frozenset[str] | None:
        """The chunk ids query ``qid``'s principal may read (``None``: no access policy)."""
        if self.access is None:
            return None
        if self._allowed_for != self.indexes.generation:
            self._allowed, self._allowed_for = {}, self.indexes.generation
        principal = self.principal(qid)
        key = json.dumps(self.access.key(principal), sort_keys=True)
        if key not in self._allowed:
            if len(self._allowed) >= ALLOWED_MEMO:  # a server meets many principals
                self._allowed.clear()
            self._allowed[key] = self.access.allowed(self.indexes.chunks, principal)
        return self._allowed[key]

    def guard(self, run: Run, counter: str) -> Run:
        """``run`` without the chunks its queries' principals cannot read; what it removes is
        added to ``access_stats[counter]``."""
        if self.access is None:
            return run
        out: Run = {}
        caught = 0
        for qid, scores in run.items():
            allowed = self.allowed(qid) or frozenset()
            out[qid] = {c: s for c, s in scores.items() if c in allowed}
            caught += len(scores) - len(out[qid])
        self.access_stats[counter] = self.access_stats.get(counter, 0.0) + caught
        return out

    def _search(self, retriever: Retriever, queries: Mapping[str, str], k: int) -> Run:
        """``retriever`` over ``queries``, each query restricted to what its principal may read:
        inside the index (``FilteredRetriever``) or over the whole ranking, then cut to ``k``."""
        if self.access is None or not queries:
            return retriever.retrieve(queries, k)
        groups: dict[frozenset[str], dict[str, str]] = {}
        for qid, text in queries.items():
            groups.setdefault(self.allowed(qid) or frozenset(), {})[qid] = text
        out: Run = {}
        for allowed, texts in groups.items():
            if not allowed:
                out.update({q: {} for q in texts})
            elif implements(retriever, FilteredRetriever):
                out.update(retriever.retrieve_within(texts, k, allowed))
            else:  # no filter inside: its whole ranking, filtered (exact, slower)
                depth = max(k, len(self.indexes.chunks))
                for qid, scores in retriever.retrieve(texts, depth).items():
                    kept = [c for c in ranked(scores) if c in allowed][:k]
                    out[qid] = {c: scores[c] for c in kept}
        return out

    def declared(self, stage: QueryMetadataAware) -> dict[str, dict[str, Any]]:
        """The fields ``stage`` declares of each query's metadata (absent or null: left out)."""
        fields = tuple(stage.query_metadata_fields)
        return {
            q: {f: m[f] for f in fields if m.get(f) is not None} for q, m in self.metadata.items()
        }

    def transform(self, queries: Mapping[str, str]) -> dict[str, str]:
        out = dict(queries)
        for transform in self.query_transforms.values():
            out = dict(transform.transform(out))
        return out

    def variants(self, queries: Mapping[str, str], retriever: str) -> dict[str, list[str]]:
        """Per query, the texts ``retriever`` runs when a ``QueryVariants`` transform asks for
        more than the query (the ordered union of their lists); ``{}``: just the queries."""
        out: dict[str, list[str]] = {}
        for transform in self.query_transforms.values():
            if isinstance(transform, QueryVariants):
                for qid, texts in transform.variants(queries, retriever).items():
                    have = out.setdefault(qid, [])
                    have += [t for t in texts if t not in have]
        return out

    def retrieve(
        self,
        name: str,
        queries: Mapping[str, str],
        texts: Mapping[str, Sequence[str]],
        k: int,
        latency_queries: int,
    ) -> RetrieverRun:
        """Retriever ``name``'s run over ``queries`` (its variant ``texts`` where a transform
        gave some), the latencies of the first ``latency_queries`` queries run one at a time,
        and whether it came from the cache."""
        if not texts:
            run, ms, cached = self._run(name, queries, k, latency_queries)
        else:
            run, ms, cached = self._variant_run(name, queries, texts, k, latency_queries)
        # the pre-filter's result checked again: a foreign component, a cache entry
        return self.guard(run, f"{name}/caught"), ms, cached

    def _variant_run(
        self,
        name: str,
        queries: Mapping[str, str],
        texts: Mapping[str, Sequence[str]],
        k: int,
        latency_queries: int,
    ) -> RetrieverRun:
        """``_run`` over every text of every query (ids: the query id, U+001F, the text's index),
        each query's lists fused by reciprocal rank (one text: its own list). A query's latency
        is the sum over its texts. ``RetrievalResult.queries`` keeps the query's own text (what a
        reranker reads)."""
        flat: dict[str, str] = {}
        owner: dict[str, list[str]] = {}
        for qid, text in queries.items():
            for i, t in enumerate(texts.get(qid) or [text]):
                flat[f"{qid}\x1f{i}"] = t
                owner.setdefault(qid, []).append(f"{qid}\x1f{i}")
        timed = [f for qid in list(queries)[:latency_queries] for f in owner[qid]]
        run, lat, cached = self._run(name, flat, k, len(timed))
        ms = dict(zip(timed, lat))
        fuse = RRFFusion(VARIANT_RRF_K)
        out: Run = {}
        for qid, ids in owner.items():
            lists = {f: {qid: run.get(f, {})} for f in ids}
            out[qid] = (
                dict(lists[ids[0]][qid]) if len(ids) == 1 else fuse.fuse(lists, k).get(qid, {})
            )
        latencies = [sum(ms.get(f, 0.0) for f in owner[q]) for q in list(queries)[:latency_queries]]
        return out, latencies, cached

    def _read(
        self, retriever: Retriever, queries: Mapping[str, str]
    ) -> dict[str, dict[str, Any]] | None:
        """What a metadata-reading retriever reads of each query, and with an access policy what
        each query's principal may read (both key the cached runs)."""
        read = self.declared(retriever) if implements(retriever, QueryMetadataAware) else None
        if self.access is None:
            return read
        own = read or {}
        return {
            q: {**own.get(q, {}), ACCESS_KEY: self.access.key(self.principal(q))} for q in queries
        }

    def _run(
        self, name: str, queries: Mapping[str, str], k: int, latency_queries: int
    ) -> RetrieverRun:
        """One retriever's run, through the whole-run entry when the corpus is cached."""
        retriever = self.retrievers[name]
        # a stage that caches its own per-query output (CachesOwnRuns) is always called
        cache = (
            self.cache
            if self.indexes.chunks_key and not implements(retriever, CachesOwnRuns)
            else None
        )
        if cache is None:
            return self._rows(name, queries, k, latency_queries, None)
        key = keys.run_key(
            self.configs.get(name),
            identity(retriever),
            k,
            self.indexes.chunks_key,
            queries,
            self._read(retriever, queries),
        )
        wanted = min(latency_queries, len(queries))

        def read() -> RetrieverRun | None:
            entry = cache.get_json("runs", key, plain=True)
            if entry is None:
                return None
            if len(entry["latency_ms"]) < wanted:  # too few queries timed: through the rows
                cache.unusable("runs")
                return None
            return entry["run"], entry["latency_ms"][:latency_queries], True

        def search() -> RetrieverRun:
            return self._rows(name, queries, k, latency_queries, cache)

        def store(value: RetrieverRun) -> None:
            # ids, scores and latencies: plain JSON (orjson), ~4x faster to write and read
            cache.put_json("runs", key, {"run": value[0], "latency_ms": value[1]}, plain=True)

        return cache.memo("runs", key, search, read=read, write=store)

    def _depth(self, retriever: Retriever, k: int, cache: StageCache | None) -> int:
        """How deep a cached row is searched: an ``IncrementalRetriever``'s ``row_depth`` (the
        run itself is cut to ``k``), else ``k``; no deeper rows under an access policy."""
        if cache is None or self.access is not None:
            return k
        if not isinstance(retriever, IncrementalRetriever):
            return k
        return max(k, retriever.row_depth(k))

    def _carry(
        self,
        name: str,
        queries: Mapping[str, str],
        todo: Sequence[str],
        row_key: Mapping[str, str],
        k: int,
        cache: StageCache,
    ) -> dict[str, dict[str, Any]]:
        """The rows of ``todo`` carried over from the chunk set the retriever's index was just
        updated from (``Indexes.updated_from``): read from that set's table and kept where the
        retriever shows they are still exact (``IncrementalRetriever.carry``), with their new
        scores. The latency a row recorded stays with it."""
        retriever = self.retrievers[name]
        base = self.indexes.updated_from.get(name)
        if not base or self.access is not None or not isinstance(retriever, IncrementalRetriever):
            return {}
        table = keys.query_run_table(self.configs.get(name), identity(retriever), k, base)
        found = cache.get_many("query_runs", table, [row_key[q] for q in todo], counted=False)
        old: dict[str, dict[str, Any]] = {}
        for q in todo:
            raw = found.get(row_key[q])
            row = orjson.loads(raw) if raw is not None else None
            if row is not None and "floor" in row:  # rows of rag_lab < 0.5 bound nothing below
                old[q] = row
        if not old:
            return {}
        kept = retriever.carry(
            {q: queries[q] for q in old},
            {q: ({**r["run"], **r.get("more", {})}, float(r["floor"])) for q, r in old.items()},
            k,
        )
        return {
            q: {**_row(deep, k, len(deep), floor), "ms": old[q].get("ms")}
            for q, (deep, floor) in kept.items()
        }

    def _rows(
        self,
        name: str,
        queries: Mapping[str, str],
        k: int,
        latency_queries: int,
        cache: StageCache | None,
    ) -> RetrieverRun:
        """``queries`` through retriever ``name``, each query's result read back from its row of
        the per-query table (``query_runs``) when an earlier run stored it: only the others are
        searched (one batch), or, after an edit of the corpus, carried over from the rows of the
        chunk set before it where the edit provably leaves them exact (``_carry``). The first
        ``latency_queries`` queries are timed one at a time unless their row holds a latency.
        The third value says whether nothing was searched."""
        retriever = self.retrievers[name]
        timed = list(queries)[:latency_queries]
        rows: dict[str, dict[str, Any]] = {}
        row_key: dict[str, str] = {}
        table = ""
        depth = self._depth(retriever, k, cache)
        if cache is not None:
            read = self._read(retriever, queries)
            table = keys.query_run_table(
                self.configs.get(name), identity(retriever), k, self.indexes.chunks_key
            )
            row_key = {
                q: keys.query_run_key(text, None if read is None else read.get(q, {}))
                for q, text in queries.items()
            }
            found = cache.get_many("query_runs", table, list(row_key.values()))
            rows = {q: orjson.loads(found[r]) for q, r in row_key.items() if r in found}
        todo = [q for q in queries if q not in rows]
        untimed = [q for q in timed if rows.get(q, {}).get("ms") is None]
        if todo or untimed:
            self.indexes.ensure(name)
        carried = self._carry(name, queries, todo, row_key, k, cache) if todo and cache else {}
        rows.update(carried)
        todo = [q for q in todo if q not in carried]
        untimed = [q for q in timed if rows.get(q, {}).get("ms") is None]
        self.row_stats[name] = {"searched": len(todo), "carried": len(carried)}
        fresh: Run = self._search(retriever, {q: queries[q] for q in todo}, depth) if todo else {}
        searched = {q: _row(scores, k, depth) for q, scores in fresh.items()}
        ms: dict[str, float] = {}
        for qid in untimed:
            t0 = time.perf_counter()
            self._search(retriever, {qid: queries[qid]}, k)
            ms[qid] = (time.perf_counter() - t0) * 1000
        if rows:
            run = {
                q: rows[q]["run"] if q in rows else searched[q]["run"]
                for q in queries
                if q in rows or q in searched
            }
        elif depth == k:  # nothing read back: the retriever's run as it returned it
            run = fresh
        else:
            run = {q: r["run"] for q, r in searched.items()}
        written = dict.fromkeys([*todo, *carried, *untimed])
        if cache is not None and written:
            cache.put_many(
                "query_runs",
                table,
                {
                    # orjson: the same JSON, ~5x faster to write and read (a row per query)
                    row_key[q]: orjson.dumps(
                        {
                            **(searched.get(q) or rows.get(q) or {"run": run.get(q, {})}),
                            "ms": ms.get(q, rows.get(q, {}).get("ms")),
                        }
                    )
                    for q in written
                },
            )
        latencies = [ms[q] if q in ms else float(rows[q]["ms"]) for q in timed]
        return run, latencies, not (todo or untimed or carried)

    def after_retrieval(
        self, queries: Mapping[str, str], runs: Mapping[str, Run], k: int
    ) -> tuple[dict[str, Run], dict[str, tuple[int, int]]]:
        """Fusion (a no-op for one retriever) and each post-processor, in order: the run of each
        stage that ran (``fusion``, then the post-processors by name), and each one's wall-clock
        window (``time.time_ns`` at its start and end)."""
        out: dict[str, Run] = {}
        windows: dict[str, tuple[int, int]] = {}
        if len(runs) == 1:
            current = next(iter(runs.values()))
        else:
            if self.fusion is None:
                raise ConfigError(
                    f"{len(runs)} retrievers ({', '.join(runs)}) need a fusion method"
                )
            t0 = time.time_ns()
            current = out["fusion"] = (
                self.fusion.fuse_queries(queries, runs, k)  # a router: per-query weights
                if isinstance(self.fusion, QueryConditioned)
                else self.fusion.fuse(runs, k)
            )
            current = out["fusion"] = self.guard(current, "fusion/caught")
            windows["fusion"] = (t0, time.time_ns())
        for name, stage in self.postprocessors.items():
            t0 = time.time_ns()
            current = out[name] = self.guard(
                stage.process(queries, current, self.indexes.chunks), f"{name}/caught"
            )
            windows[name] = (t0, time.time_ns())
        return out, windows
