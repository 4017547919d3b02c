"""What the foreign-component retrievers share (``langchain``, ``llamaindex``,
``foreign_pipeline``): the factory arguments, the corpus, the mapping of returned sources onto
chunk ids, each query's cached output, the identity that keys it, and an "index" that is a
rebuild recipe.

A foreign component cannot be pickled into the stage cache or an export (nor should it: loading a
pickle runs code). ``save_index`` writes ``rebuild.json`` instead: the factory's import path and
arguments, the package versions and the chunk ids; ``load_index`` rebuilds the component over the
same chunks (the pipeline sets the corpus first: ``fit``). A loaded export whose package versions
differ from the recorded ones says so in a warning.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.adapters.factory import FRAMEWORKS, build_component
from rag_lab.adapters.imports import describe, package_versions, source_digest
from rag_lab.adapters.mapping import MappingCounts, Source, SourceMapper
from rag_lab.cache import keys
from rag_lab.cache.keys import content_key
from rag_lab.embedder.base import Embedder
from rag_lab.errors import ConfigError
from rag_lab.types import Chunk, Run
from rag_lab.validate import choice

if TYPE_CHECKING:
    from rag_lab.cache import CacheView

log = logging.getLogger(__name__)

REBUILD_FILE = "rebuild.json"


def rank_scores(ids: Sequence[str]) -> dict[str, float]:
    """A foreign component's ordered ids as a run row: ``1 / rank`` (higher = better)."""
    return {cid: 1.0 / (i + 1) for i, cid in enumerate(ids)}


class AdapterRetriever:
    """Base of the adapter retrievers: keeps the chunks (``fit``, ``index``), builds the component
    over them on the first query not in the cache, maps what it returns onto chunk ids
    (``rag_lab.adapters.mapping``) and counts the mapping over the batch in ``stats``
    (``sources``, ``unmapped_sources``, ``mapped_by_metadata|exact|contained``,
    ``duplicate_sources``, ``adapter_cache_hits``, ``build_seconds`` when it was built:
    ``<retriever>/<stat>`` in metrics.json) and per query in ``annotations``
    (``unmapped_sources``: a per_query.parquet column, ``unmapped_sources/n_flagged``).

    Declares ``CachesOwnRuns``: each query's output (mapped ids, one row per source, the
    end-to-end answer) is cached in the ``adapters`` namespace under ``keys.adapter_key``
    (recipe, identity, corpus, depth, query text), so a rerun brings its counts back too."""

    framework = "langchain"
    # each query's output is cached under `adapters`; the embedder wrapper reads and writes the
    # `embeddings` namespace, so document vectors are shared with retrievers=[dense]
    cache_namespace = "adapters"
    caches_own_runs = True  # rag_lab.protocols.CachesOwnRuns: the pipeline does not cache the run

    def __init__(
        self,
        factory: str,
        kwargs: Mapping[str, Any] | None = None,
        corpus_argument: str | None = None,
        embedder: Embedder | None = None,
        embedder_argument: str | None = None,
        content: str = "index_text",
        allow_imports: Sequence[str] = (),
    ) -> None:
        self.framework = choice(self.framework, "framework", FRAMEWORKS)
        self.factory = str(factory)
        self.kwargs = dict(kwargs or {})
        self.corpus_argument = corpus_argument
        self.embedder = embedder
        self.embedder_argument = embedder_argument
        self.content = choice(content, "content", ("index_text", "text"))
        self.allow_imports = [str(p) for p in allow_imports or ()]
        # the import is checked now: a config naming a forbidden or missing callable fails when
        # the pipeline is built, before any corpus is read
        from rag_lab.adapters.imports import resolve

        resolve(self.factory, "factory", self.allow_imports)
        self._source = source_digest(self.factory, self.allow_imports)
        self.stats: dict[str, float] = {}
        self._chunks: list[Chunk] = []
        self._component: Any = None
        self._mapper: SourceMapper | None = None
        self._cache: CacheView | None = None
        # per query id of the last batch: one row per returned source (chunk_id, how, text)
        self.mapped: dict[str, list[dict[str, Any]]] = {}
        self.outputs: dict[str, dict[str, Any]] = {}  # each query's cached entry
        self._hits = 0
        self._corpus_key: str | None = None

    # -- identity, cache -------------------------------------------------------------------------
    def attach_cache(self, view: CacheView) -> None:
        self._cache = view

    @property
    def identity(self) -> dict[str, Any]:
        """The package versions, a hash of the factory's source code (an edit of your
        ``build_chain`` misses the cache; what it calls is not hashed) and the embedder's
        identity: part of every cached output's key."""
        out: dict[str, Any] = {
            "packages": package_versions(self.framework),
            "factory_source": self._source,
        }
        if self.embedder is not None and self.embedder_argument:
            out["embedder"] = self.embedder.identity
        return out

    def recipe(self) -> dict[str, Any]:
        """How to rebuild the component: what ``rebuild.json`` holds (no pickle)."""
        return {
            "framework": self.framework,
            "factory": self.factory,
            "kwargs": describe(self.kwargs),
            "corpus_argument": self.corpus_argument,
            "embedder_argument": self.embedder_argument,
            "content": self.content,
            "allow_imports": self.allow_imports,
            "packages": package_versions(self.framework),
        }

    # -- corpus ----------------------------------------------------------------------------------
    def fit(self, chunks: Sequence[Chunk]) -> None:
        """Keep the corpus (the component is built on first use)."""
        self._chunks = list(chunks)
        self._component = None
        self._mapper = None
        self._corpus_key = None

    def index(self, chunks: Sequence[Chunk]) -> None:
        """Keep the corpus; the component is built when a query is not in the cache."""
        self.fit(chunks)
        self.stats = {}

    @property
    def chunk_ids(self) -> list[str]:
        return [c.chunk_id for c in self._chunks]

    def save_index(self, directory: Path) -> None:
        (directory / REBUILD_FILE).write_text(
            json.dumps({**self.recipe(), "chunk_ids": self.chunk_ids}, indent=1, default=str)
        )

    def load_index(self, directory: Path) -> None:
        """Rebuild from the corpus the pipeline set (``fit``); the recipe's chunk ids and versions
        are checked against it and the installed packages."""
        saved = json.loads((directory / REBUILD_FILE).read_text())
        ids = [str(i) for i in saved.get("chunk_ids", [])]
        by_id = {c.chunk_id: c for c in self._chunks}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise ConfigError(
                f"{directory}: the recipe names {len(missing)} chunk(s) not in the corpus"
            )
        now = package_versions(self.framework)
        if saved.get("packages") and saved["packages"] != now:
            log.warning(
                "%s: built with %s, rebuilt with %s: results may differ",
                directory,
                saved["packages"],
                now,
            )
        self.fit([by_id[i] for i in ids])
        self.stats = {"index_loaded": 1.0}

    def component(self) -> Any:
        """The built component (built once per corpus)."""
        if self._component is None:
            t0 = time.perf_counter()
            if not self._chunks and self.corpus_argument:
                raise ConfigError(f"{type(self).__name__}: no corpus (index or fit first)")
            self._component = build_component(
                self.framework,
                self.factory,
                self._chunks,
                corpus_argument=self.corpus_argument,
                embedder=self.embedder,
                embedder_argument=self.embedder_argument,
                kwargs=self.kwargs,
                allow_imports=self.allow_imports,
                content=self.content,
                cache=self._cache.cache.view("embeddings") if self._cache is not None else None,
            )
            self.stats["build_seconds"] = time.perf_counter() - t0
        return self._component

    def mapper(self) -> SourceMapper:
        if self._mapper is None:
            self._mapper = SourceMapper({c.chunk_id: c for c in self._chunks})
        return self._mapper

    # -- retrieval -------------------------------------------------------------------------------
    def sources(self, component: Any, query: str, k: int) -> list[Source]:
        """What the component returns for ``query``, best first (subclasses)."""
        raise NotImplementedError

    def output(self, component: Any, query: str, k: int) -> dict[str, Any]:
        """One query's output: ``{"sources": [Source, ...], **extra}`` where ``extra`` is
        JSON-ready (the end-to-end adapter's ``answer``)."""
        return {"sources": self.sources(component, query, k)}

    def corpus_key(self) -> str:
        if self._corpus_key is None:
            self._corpus_key = content_key(
                "adapter-corpus", (f"{c.chunk_id}\x1f{c.index_text}" for c in self._chunks)
            )
        return self._corpus_key

    def query_output(self, query: str, k: int) -> dict[str, Any]:
        """``{"ids": [...], "rows": [...], **extra}`` for one query: from the ``adapters`` cache
        namespace when this recipe, identity, corpus, depth and query were seen, else computed
        (the component is built on the first miss) and stored."""
        key = ""
        if self._cache is not None:
            key = keys.adapter_key(
                {k_: v for k_, v in self.recipe().items() if k_ != "packages"},
                self.identity,
                self.corpus_key(),
                k,
                query,
            )
            hit = self._cache.get_json(key)
            if isinstance(hit, dict):
                return {**hit, "cache_hit": True}
        out = self.output(self.component(), query, k)
        sources = out.pop("sources")[:k]
        ids, rows = self.mapper().map_all(sources, MappingCounts())
        entry = {"ids": ids, "rows": rows, **out}
        if self._cache is not None:
            self._cache.put_json(key, entry)
        return entry

    def retrieve(self, queries: Mapping[str, str], k: int) -> Run:
        if not set(queries) <= set(self.mapped):
            # a new batch; a call over some of the same queries (the pipeline's one-at-a-time
            # latency runs) rewrites their rows and keeps the batch's counts
            self.mapped, self.outputs, self._hits = {}, {}, 0
        run: Run = {}
        for qid, text in queries.items():
            entry = self.query_output(text, k)
            if qid not in self.outputs:  # the batch's own reads, not the latency reruns
                self._hits += int(bool(entry.get("cache_hit")))
            self.mapped[qid] = list(entry["rows"])
            self.outputs[qid] = entry
            run[qid] = rank_scores(entry["ids"])
        counts = MappingCounts()
        for rows in self.mapped.values():
            for row in rows:
                counts.add(row["how"])
        self.stats = {**self.stats, **counts.stats(), "adapter_cache_hits": float(self._hits)}
        unmapped = counts.counts["unmapped"]
        if unmapped and len(queries) > 1:
            log.warning(
                "%s: %d of %d returned sources map to no chunk of the corpus (per query: the "
                "unmapped_sources column)",
                type(self).__name__,
                unmapped,
                int(sum(counts.counts.values())),
            )
        return run

    # -- Annotating: the unmapped sources of each query ------------------------------------------
    annotation_names = ("unmapped_sources",)

    @property
    def annotations(self) -> dict[str, dict[str, Any]]:
        """``{query_id: {"unmapped_sources": [first 200 characters of each]}}`` for the queries
        with a source that mapped to no chunk (only those)."""
        out: dict[str, dict[str, Any]] = {}
        for qid, rows in self.mapped.items():
            lost = [r["text"] for r in rows if r["how"] == "unmapped"]
            if lost:
                out[qid] = {"unmapped_sources": lost}
        return out
