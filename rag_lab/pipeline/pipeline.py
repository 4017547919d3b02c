"""The pipeline: an ordered list of stages, each behind one protocol.

    parse → chunk → query transforms → retrievers → fusion → post-processors → (answer stage)

``Pipeline.run(queries, k)`` returns a frozen ``RetrievalResult``: every stage's run, the final
run, per-query latencies, which runs came from the cache and each stage's stats. The answer stage
(context → generator → judge) is ``rag_lab.pipeline.answers``. Stages are built by
``rag_lab.pipeline.build``; the pipeline hands each ``CacheAware`` stage a view of its cache
namespace and keys every cached corpus stage with ``rag_lab.cache.keys``; it fits each
``CorpusFitted`` stage when the corpus is set, hands each ``QueryMetadataAware`` stage the metadata
fields it declares before a run, and a ``QueryConditioned`` fusion (the router) the query texts
(``rag_lab.protocols``, ``rag_lab.fusion.base``). With a ``fallback`` chain
(``rag_lab.pipeline.fallback``), a query whose final run its acceptance refuses is answered by the
chain's next level (a sub-pipeline, with its own corpus or the main one), or refused with an empty
run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from rag_lab.cache import StageCache, diff_stats, keys
from rag_lab.cache.fingerprints import fingerprint
from rag_lab.chunker.base import Chunker
from rag_lab.contract.base import Contract
from rag_lab.errors import ConfigError
from rag_lab.fusion.base import Fusion, QueryConditioned, Weighted
from rag_lab.fusion.rrf import RRFFusion
from rag_lab.io.files import fingerprint_files
from rag_lab.parser.base import ParsedFile, Parser, parse_file, read_corpus
from rag_lab.pipeline.ingest import ingest_report
from rag_lab.pipeline.result import RetrievalResult
from rag_lab.postprocess.base import PostProcessor
from rag_lab.protocols import (
    Annotating,
    CacheAware,
    CachesOwnRuns,
    CorpusFitted,
    Identified,
    Measured,
    QueryMetadataAware,
)
from rag_lab.query_transforms.base import QueryTransform, QueryVariants
from rag_lab.retrievers.base import PersistentRetriever, Retriever
from rag_lab.types import (
    Chunk,
    Document,
    Run,
    chunk_from_dict,
    document_from_dict,
    document_to_dict,
)
from rag_lab.validate import OptionError, integer

if TYPE_CHECKING:
    from rag_lab.pipeline.fallback import FallbackChain, FallbackLevel

log = logging.getLogger(__name__)

# reciprocal-rank offset fusing one retriever's lists over a query's variant texts (QueryVariants)
VARIANT_RRF_K = 60.0


def _stats(name: str, stage: object) -> dict[str, float]:
    return (
        {f"{name}/{k}": float(v) for k, v in stage.stats.items()}
        if isinstance(stage, Measured)
        else {}
    )


# a chunks entry's columns (format 2), in ``Chunk``'s field order
_CHUNK_COLUMNS = ("chunk_id", "doc_id", "text", "start", "end", "title", "section", "metadata")


def _chunk_columns(chunks: Sequence[Chunk]) -> dict[str, list[Any]]:
    """Chunks as columns (one list per field; metadata as an index into its distinct values):
    decoded in about half the time of one object per chunk."""
    cols: dict[str, list[Any]] = {f: [getattr(c, f) for c in chunks] for f in _CHUNK_COLUMNS[:-1]}
    distinct: dict[str, int] = {}
    metas: list[dict[str, Any]] = []
    index = []
    for c in chunks:
        meta = dict(c.metadata)
        spelled = json.dumps(meta, sort_keys=True, default=str)
        if spelled not in distinct:
            distinct[spelled] = len(metas)
            metas.append(meta)
        index.append(distinct[spelled])
    return {**cols, "metadata": metas, "metadata_index": index}


def _chunk_entry(raw: Any) -> tuple[tuple[Chunk, ...], Mapping[str, Any]]:
    """A ``chunks`` cache entry as frozen chunks and its ingest report: format 2 holds columns
    (``_chunk_columns``); earlier entries a list of chunk dicts (0.2: the bare list)."""
    entry = raw if isinstance(raw, dict) else {"chunks": raw}
    if "columns" in entry:
        cols = entry["columns"]
        metas = [cols["metadata"][i] for i in cols["metadata_index"]]
        rows = zip(*(cols[f] for f in _CHUNK_COLUMNS[:-1]), metas, strict=True)
        return tuple(Chunk(*row) for row in rows), entry.get("ingest") or {}
    return tuple(chunk_from_dict(c) for c in entry["chunks"]), entry.get("ingest") or {}


@dataclass
class Pipeline:
    """The stages, in order, and the corpus they index.

    ``retrieve_k`` is how many chunks each retriever returns and fusion keeps per query.
    ``stage_configs`` are the resolved config subtrees that key the stage cache (``cache``, when
    set): parsed documents, chunks, each retriever's index and run are read back instead of
    recomputed when nothing upstream changed. ``fallback``: the chain tried when a query's final
    run is refused by its acceptance (``rag_lab.pipeline.fallback``; ``None``: off).
    """

    parser: Parser
    chunker: Chunker
    retrievers: dict[str, Retriever]
    fusion: Fusion | None = None
    postprocessors: dict[str, PostProcessor] = field(default_factory=dict)
    query_transforms: dict[str, QueryTransform] = field(default_factory=dict)
    retrieve_k: int = 100
    cache: StageCache | None = None
    stage_configs: dict[str, Any] = field(default_factory=dict)
    chunks: dict[str, Chunk] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    chunks_key: str = ""
    corpus_warnings: list[str] = field(default_factory=list)
    contract: Contract | None = None
    on_parse_error: str = "fail"
    ingest: dict[str, Any] = field(default_factory=dict)
    _indexed: set[str] = field(default_factory=set)
    _query_metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    fallback: FallbackChain | None = None

    def __post_init__(self) -> None:
        try:
            self.retrieve_k = integer(self.retrieve_k, "retrieve_k", ge=1)
        except OptionError as exc:
            raise exc.at("") from None  # evaluation.retrieve_k (an export: retrieve_k)
        if isinstance(self.fusion, Weighted) and len(self.retrievers) > 1:
            unknown = sorted(set(self.fusion.weights) - set(self.retrievers))
            if unknown:  # refused before anything is indexed or retrieved
                raise ConfigError(
                    f"fusion.weights names {', '.join(unknown)}, not a retriever of this pipeline"
                    f" (retrievers: {', '.join(self.retrievers)}; drop the weight or add it to "
                    "retrievers=[...])"
                )
        self._cache_start = self.cache.stats() if self.cache is not None else {}
        if self.cache is None:
            return
        stages: list[object] = [
            *self.retrievers.values(),
            *self.postprocessors.values(),
            *self.query_transforms.values(),
        ]
        for stage in stages:
            if isinstance(stage, CacheAware):
                stage.attach_cache(self.cache.view(stage.cache_namespace))

    def cache_counters(self) -> dict[str, float]:
        """What this pipeline read from and wrote to the stage cache since it was built (``{}``
        without a cache): totals and ``cache/<namespace>/hits|misses``."""
        if self.cache is None:
            return {}
        return diff_stats(self.cache.stats(), self._cache_start)

    @property
    def reranker(self) -> PostProcessor | None:
        """The ``reranker`` group's stage (the first post-processor), if configured."""
        return self.postprocessors.get("reranker")

    # -- corpus ----------------------------------------------------------------------------------
    def load_corpus(
        self,
        sources: Sequence[Path],
        root: Path,
        corpus_fingerprint: str,
        on_empty: str = "skip",
    ) -> list[Chunk]:
        """Parse and chunk the corpus (each step read from the cache when its key hits).
        ``on_empty``: documents with empty text are skipped (counted in ``corpus_warnings``) or
        refused (``fail``). A fully cached rerun does not repeat the warning."""
        t0 = time.perf_counter()
        # a non-default policy keys its own entry: a `skip` run's documents must not let a `fail`
        # run pass; the contract changes the documents' metadata, so it keys them too
        parser_key: Any = self.stage_configs.get("parser")
        policy: dict[str, Any] = {"on_empty": on_empty} if on_empty != "skip" else {}
        if self.on_parse_error != "fail":
            policy["on_error"] = self.on_parse_error
        if self.contract is not None:
            policy["contract"] = self.stage_configs.get("contract")
        if policy:
            parser_key = {"parser": parser_key, **policy}
        docs_key = keys.documents_key(parser_key, corpus_fingerprint)
        chunker_key: Any = self.stage_configs.get("chunker")
        if isinstance(self.chunker, Identified):  # an adapter's package versions key its chunks
            chunker_key = {"chunker": chunker_key, "identity": self.chunker.identity}
        chunks_key = keys.chunks_key(chunker_key, docs_key)
        # decoded once per process: a multirun's jobs with one chunker share the chunk objects
        cached = self.cache.get_decoded("chunks", chunks_key, _chunk_entry) if self.cache else None
        if cached is None and self.cache:
            with self.cache.claim("chunks", chunks_key):  # parallel jobs chunk it once
                cached = self.cache.get_decoded("chunks", chunks_key, _chunk_entry)
                if cached is None:
                    chunks = self._chunk(sources, root, docs_key, chunks_key, on_empty, t0)
        elif cached is None:
            chunks = self._chunk(sources, root, docs_key, chunks_key, on_empty, t0)
        if cached is not None:
            chunks = list(cached[0])
            self.ingest = dict(cached[1])
            self.timings.update(parse_seconds=0.0, chunk_seconds=time.perf_counter() - t0)
        self.set_chunks(chunks)
        self.chunks_key = chunks_key
        if self.fallback is not None:
            for level in self.fallback.levels:
                self._load_level(level, on_empty)
        return chunks

    def _chunk(
        self,
        sources: Sequence[Path],
        root: Path,
        docs_key: str,
        chunks_key: str,
        on_empty: str,
        t0: float,
    ) -> list[Chunk]:
        """Parse (or read the cached documents) and chunk; the chunks stored under
        ``chunks_key``."""
        docs = self._documents(sources, root, docs_key, on_empty)
        t1 = time.perf_counter()
        chunks = self.chunker.chunk(docs)
        if self.cache and chunks:
            self.cache.put_json(
                "chunks",
                chunks_key,
                {"format": 2, "columns": _chunk_columns(chunks), "ingest": self.ingest},
            )
        self.timings.update(parse_seconds=t1 - t0, chunk_seconds=time.perf_counter() - t1)
        return chunks

    def _load_level(self, level: FallbackLevel, on_empty: str) -> None:
        """A fallback level's corpus: the main chunks (and their cache key, so the level's runs
        share the main pipeline's keys) or its own folder, parsed and chunked through the cache
        like the main corpus; its chunk ids must not collide with the main corpus's."""
        sub = level.pipeline
        if level.corpus is None:
            sub.set_chunks(list(self.chunks.values()))
            sub.chunks_key = self.chunks_key
            return
        root = Path(level.corpus)
        files = (
            sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
            if root.is_dir()
            else []
        )
        if not files:
            raise ConfigError(f"fallback.levels.{level.name}.corpus: no files in {root}")
        sub.load_corpus(files, root, fingerprint(files, root=root), on_empty)
        clash = sorted(set(sub.chunks) & set(self.chunks))
        if clash:
            raise ConfigError(
                f"fallback.levels.{level.name}.corpus: {len(clash)} chunk id(s) also in the main "
                f"corpus (first: {clash[0]}): give its documents other doc_ids"
            )

    @property
    def all_chunks(self) -> dict[str, Chunk]:
        """The main corpus's chunks plus those of every fallback level with its own corpus: what
        a run through the chain can return (scoring, attribution and answers read these)."""
        out = dict(self.chunks)
        for level in self.fallback.levels if self.fallback is not None else []:
            if level.corpus is not None:
                out.update(level.pipeline.chunks)
        return out

    def _parse_cached(self, root: Path) -> Any:
        """``parse_file`` through the per-file cache entry (parser config + the file's name and
        bytes): a chunker or contract sweep, or an edit of one file, never re-parses (or re-OCRs)
        the others."""
        cache, parser_cfg = self.cache, self.stage_configs.get("parser")
        # an auto parser's file is keyed on its suffix's parser alone: changing the HTML options
        # keeps every PDF's OCR
        by_suffix = {}
        if isinstance(parser_cfg, dict) and isinstance(parser_cfg.get("parsers"), dict):
            by_suffix = {f".{k.lower().lstrip('.')}": v for k, v in parser_cfg["parsers"].items()}

        def parse(path: Path) -> ParsedFile:
            if cache is None:
                return parse_file(self.parser, path, root)
            config = by_suffix.get(path.suffix.lower(), parser_cfg)
            key = keys.parsed_file_key(config, fingerprint_files([path], root=root))
            raw = cache.get_json("parsed_files", key)
            if raw is None:
                with cache.claim("parsed_files", key):  # parallel jobs parse (OCR) a file once
                    raw = cache.get_json("parsed_files", key)
                    if raw is None:
                        parsed = parse_file(self.parser, path, root)
                        entry = {
                            "documents": [[w, document_to_dict(d)] for w, d in parsed.documents],
                            "seconds": parsed.seconds,
                        }
                        cache.put_json("parsed_files", key, entry)
                        return parsed
            if isinstance(raw, dict):
                docs = tuple((w, document_from_dict(d)) for w, d in raw["documents"])
                return ParsedFile(str(path), docs, float(raw["seconds"]))
            return parse_file(self.parser, path, root)

        return parse

    def _documents(
        self, sources: Sequence[Path], root: Path, key: str, on_empty: str
    ) -> list[Document]:
        raw = self.cache.get_json("documents", key) if self.cache else None
        if raw is None and self.cache is not None:
            with self.cache.claim("documents", key):  # parallel jobs parse the corpus once
                raw = self.cache.get_json("documents", key)
                if raw is None:
                    return self._parse_documents(sources, root, key, on_empty)
        if raw is None:
            return self._parse_documents(sources, root, key, on_empty)
        # 0.1 entries are a plain list; later ones carry the warnings
        entry = raw if isinstance(raw, dict) else {"documents": raw, "warnings": []}
        self.corpus_warnings = list(entry.get("warnings", []))
        self.ingest = dict(entry.get("ingest") or {})
        return [document_from_dict(d) for d in entry["documents"]]

    def _parse_documents(
        self, sources: Sequence[Path], root: Path, key: str, on_empty: str
    ) -> list[Document]:
        """Parse the corpus (through the per-file cache) and check its metadata contract; the
        documents stored under ``key``."""
        corpus = read_corpus(
            self.parser, sources, root, on_empty, self.on_parse_error, self._parse_cached(root)
        )
        warnings = list(corpus.warnings)
        docs = list(corpus.documents)
        problems: tuple[Any, ...] = ()
        if self.contract is not None:
            where = {d.doc_id: w for f in corpus.files for w, d in f.documents}
            checked = self.contract.check(docs, where)
            docs, problems = list(checked.documents), checked.problems
            if problems:
                warnings.append(
                    f"n_contract_problems={len(problems)}: documents that break the metadata "
                    f"contract (first: {problems[0]}; all in ingest_report.json; "
                    "contract.mode=strict refuses them)"
                )
        self.corpus_warnings = warnings
        for w in warnings:
            log.warning(w)
        self.ingest = ingest_report(corpus, docs, problems)
        if self.cache:
            entry = {
                "documents": [document_to_dict(d) for d in docs],
                "warnings": warnings,
                "ingest": self.ingest,
            }
            self.cache.put_json("documents", key, entry)
        return docs

    def set_chunks(self, chunks: Sequence[Chunk]) -> None:
        """Make ``chunks`` the corpus; every retriever must be (re)indexed or restored after."""
        if not chunks:
            raise ConfigError("the chunker produced no chunks")
        self.chunks = {c.chunk_id: c for c in chunks}
        if len(self.chunks) != len(chunks):
            raise ConfigError("the chunker produced duplicate chunk ids")
        self._indexed = set()
        for stage in self._stages():
            if isinstance(stage, CorpusFitted):  # e.g. abbreviations mined from the corpus
                stage.fit(list(chunks))

    def _stages(self) -> list[object]:
        """Every query-time stage, in pipeline order (transforms, retrievers, fusion, post)."""
        fusion = [self.fusion] if self.fusion is not None else []
        return [
            *self.query_transforms.values(),
            *self.retrievers.values(),
            *fusion,
            *self.postprocessors.values(),
        ]

    def set_query_metadata(self, metadata: Mapping[str, Mapping[str, Any]] | None) -> None:
        """Hand every ``QueryMetadataAware`` stage the fields it declares of each query's
        metadata (``{}`` for a query without them; every stage is called, so nothing of an earlier
        run's metadata is left behind)."""
        self._query_metadata = {q: dict(m) for q, m in (metadata or {}).items()}
        for stage in self._stages():
            if isinstance(stage, QueryMetadataAware):
                stage.set_query_metadata(self._declared(stage))

    def _declared(self, stage: QueryMetadataAware) -> dict[str, dict[str, Any]]:
        """The fields ``stage`` declares of each query's metadata (absent or null: left out)."""
        fields = tuple(stage.query_metadata_fields)
        return {
            q: {f: m[f] for f in fields if m.get(f) is not None}
            for q, m in self._query_metadata.items()
        }

    def restore(self, chunks: Sequence[Chunk], index_dirs: Mapping[str, Path]) -> None:
        """Set the corpus and load every retriever's saved index (an export, a server): nothing is
        encoded. ``ConfigError`` when a retriever has no folder, cannot load one, or its index
        names chunks that ``chunks`` lacks, or when the pipeline has a fallback chain (its levels'
        corpora and indexes are not part of an export)."""
        if self.fallback is not None:
            raise ConfigError(
                "fallback: a pipeline with a fallback chain cannot be restored from saved indexes "
                "(exports and servers do not carry its levels yet): export a run without fallback"
            )
        self.set_chunks(chunks)
        for name, retriever in self.retrievers.items():
            directory = index_dirs.get(name)
            if (
                directory is None
                or not Path(directory).is_dir()
                or not isinstance(retriever, PersistentRetriever)
            ):
                raise ConfigError(f"no saved index for retriever {name!r} ({directory})")
            retriever.load_index(Path(directory))
            missing = set(retriever.chunk_ids) - set(self.chunks)
            if missing:
                raise ConfigError(
                    f"{directory}: index names {len(missing)} chunk(s) not in the corpus"
                )
            self._indexed.add(name)

    def index_all(self) -> None:
        """Index (or restore from the cache) every retriever over the current chunks."""
        for name in self.retrievers:
            self._ensure_indexed(name)

    def _identity(self, stage: object) -> Any:
        return stage.identity if isinstance(stage, Identified) else None

    def _load_cached_index(
        self, cache: StageCache, retriever: PersistentRetriever, entry: Path
    ) -> bool:
        """Restore ``retriever`` from a cached index folder; ``False`` (and the entry is dropped
        with a warning, a miss) when it does not load or does not index exactly the current
        chunks: truncated or garbage files are rebuilt, never trusted."""
        try:
            retriever.load_index(entry)
            held = retriever.chunk_ids
            if len(held) != len(self.chunks) or set(held) != set(self.chunks):
                raise ValueError(f"it indexes {len(held)} chunk ids, not the {len(self.chunks)}")
        except Exception as exc:  # any library's reading error: faiss, bm25s, json, numpy
            cache.corrupt("indexes", entry, exc, was_hit=True)
            return False
        return True

    def _restore_index(self, cache: StageCache, retriever: PersistentRetriever, key: str) -> bool:
        """``retriever`` restored from the cached index ``key``: False on a miss (or an entry
        that does not load, dropped)."""
        entry = cache.get_dir("indexes", key)
        return entry is not None and self._load_cached_index(cache, retriever, entry)

    def _ensure_indexed(self, name: str) -> None:
        """Index retriever ``name`` over the current chunks: restored from the stage cache when the
        retriever can persist its index and the entry exists, built (and stored) otherwise."""
        if name in self._indexed:
            return
        if not self.chunks:
            raise ConfigError(
                "the pipeline has no corpus: load_corpus, set_chunks or restore first"
            )
        retriever = self.retrievers[name]
        t0 = time.perf_counter()
        persistent = isinstance(retriever, PersistentRetriever)
        cache = self.cache if self.chunks_key and persistent else None
        key = (
            keys.index_key(
                self.stage_configs.get("retrievers", {}).get(name),
                self._identity(retriever),
                self.chunks_key,
            )
            if cache
            else ""
        )
        if cache is None or not isinstance(retriever, PersistentRetriever):
            retriever.index(list(self.chunks.values()))
        elif not self._restore_index(cache, retriever, key):
            with cache.claim("indexes", key):  # parallel jobs build (and encode) it once
                if not self._restore_index(cache, retriever, key):
                    retriever.index(list(self.chunks.values()))
                    try:
                        cache.put_dir("indexes", key, retriever.save_index)
                    except NotImplementedError:
                        pass
        self.timings[f"{name}/index_seconds"] = time.perf_counter() - t0
        self._indexed.add(name)
        stats = retriever.stats if isinstance(retriever, Measured) else {}
        log.info(
            "indexed %d chunks with %s: %s",
            len(self.chunks),
            name,
            {k: round(v, 3) for k, v in stats.items()},
        )

    # -- retrieval -------------------------------------------------------------------------------
    def transform_queries(self, queries: Mapping[str, str]) -> dict[str, str]:
        out = dict(queries)
        for transform in self.query_transforms.values():
            out = dict(transform.transform(out))
        return out

    def query_texts(self, queries: Mapping[str, str], retriever: str) -> dict[str, list[str]]:
        """Per query, the texts ``retriever`` runs when a ``QueryVariants`` transform asks for
        more than the query (the ordered union of their lists); ``{}``: just the queries."""
        out: dict[str, list[str]] = {}
        for transform in self.query_transforms.values():
            if isinstance(transform, QueryVariants):
                for qid, texts in transform.variants(queries, retriever).items():
                    have = out.setdefault(qid, [])
                    have += [t for t in texts if t not in have]
        return out

    def _variant_run(
        self,
        name: str,
        queries: Mapping[str, str],
        texts: Mapping[str, Sequence[str]],
        k: int,
        latency_queries: int,
    ) -> tuple[Run, list[float], bool]:
        """``_retriever_run`` over every text of every query (ids: the query id, U+001F, the text's
        index), each query's lists fused by reciprocal rank (one text: its own list). A query's
        latency is the sum over its texts. ``RetrievalResult.queries`` keeps the query's own text
        (what a reranker reads)."""
        flat: dict[str, str] = {}
        owner: dict[str, list[str]] = {}
        for qid, text in queries.items():
            for i, t in enumerate(texts.get(qid) or [text]):
                flat[f"{qid}\x1f{i}"] = t
                owner.setdefault(qid, []).append(f"{qid}\x1f{i}")
        timed = [f for qid in list(queries)[:latency_queries] for f in owner[qid]]
        run, lat, cached = self._retriever_run(name, flat, k, len(timed))
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

    def _retriever_run(
        self, name: str, queries: Mapping[str, str], k: int, latency_queries: int
    ) -> tuple[Run, list[float], bool]:
        """One retriever's run (cached when the corpus came from ``load_corpus`` with a cache), the
        per-query latencies in ms of the first ``latency_queries`` queries run one at a time, and
        whether the run came from the cache."""
        retriever = self.retrievers[name]
        # a stage that caches its own per-query output (CachesOwnRuns) is always called
        cache = self.cache if self.chunks_key and not isinstance(retriever, CachesOwnRuns) else None
        key = (
            keys.run_key(
                self.stage_configs.get("retrievers", {}).get(name),
                self._identity(retriever),
                k,
                self.chunks_key,
                queries,
                # a retriever that reads query metadata is keyed by what it reads
                self._declared(retriever) if isinstance(retriever, QueryMetadataAware) else None,
            )
            if cache
            else ""
        )

        def search() -> tuple[Run, list[float], bool]:  # through the per-query rows; stored
            run, latencies, searched = self._query_rows(name, queries, k, latency_queries, cache)
            if cache is not None:
                cache.put_json("runs", key, {"run": run, "latency_ms": latencies})
            return run, latencies, not searched

        if cache is None:
            return search()
        entry = cache.get_json("runs", key)
        if entry is None:
            with cache.claim("runs", key):  # parallel jobs search it once
                entry = cache.get_json("runs", key)
                if entry is None:
                    return search()
        if len(entry["latency_ms"]) >= min(latency_queries, len(queries)):
            return entry["run"], entry["latency_ms"][:latency_queries], True
        return search()

    def _query_rows(
        self,
        name: str,
        queries: Mapping[str, str],
        k: int,
        latency_queries: int,
        cache: StageCache | None,
    ) -> tuple[Run, list[float], bool]:
        """``queries`` through retriever ``name``, each query's result read back from its row of
        the per-query table (``query_runs``) when an earlier run stored it: only the others are
        searched (one batch), so a query set that grew by one searches one query. The first
        ``latency_queries`` queries are timed one at a time unless their row holds a latency.
        Returns the run, the latencies and whether anything was searched."""
        retriever = self.retrievers[name]
        timed = list(queries)[:latency_queries]
        rows: dict[str, dict[str, Any]] = {}
        row_key: dict[str, str] = {}
        table = ""
        if cache is not None:
            read = self._declared(retriever) if isinstance(retriever, QueryMetadataAware) else None
            table = keys.query_run_table(
                self.stage_configs.get("retrievers", {}).get(name),
                self._identity(retriever),
                k,
                self.chunks_key,
            )
            row_key = {
                q: keys.query_run_key(text, None if read is None else read.get(q, {}))
                for q, text in queries.items()
            }
            found = cache.get_many("query_runs", table, list(row_key.values()))
            rows = {q: json.loads(found[r]) for q, r in row_key.items() if r in found}
        todo = [q for q in queries if q not in rows]
        untimed = [q for q in timed if rows.get(q, {}).get("ms") is None]
        if todo or untimed:
            self._ensure_indexed(name)
        fresh: Run = retriever.retrieve({q: queries[q] for q in todo}, k) if todo else {}
        ms: dict[str, float] = {}
        for qid in untimed:
            t0 = time.perf_counter()
            retriever.retrieve({qid: queries[qid]}, k)
            ms[qid] = (time.perf_counter() - t0) * 1000
        if rows:
            run = {
                q: rows[q]["run"] if q in rows else fresh[q]
                for q in queries
                if q in rows or q in fresh
            }
        else:  # nothing read back: the retriever's run as it returned it
            run = fresh
        if cache is not None and (todo or untimed):
            cache.put_many(
                "query_runs",
                table,
                {
                    row_key[q]: json.dumps(
                        {"run": run.get(q, {}), "ms": ms.get(q, rows.get(q, {}).get("ms"))}
                    ).encode()
                    for q in dict.fromkeys([*todo, *untimed])
                },
            )
        latencies = [ms[q] if q in ms else float(rows[q]["ms"]) for q in timed]
        return run, latencies, bool(todo or untimed)

    def _after_retrieval(
        self, queries: Mapping[str, str], runs: Mapping[str, Run], k: int
    ) -> dict[str, Run]:
        """Fusion (a no-op for one retriever) and each post-processor, in order."""
        out: dict[str, Run] = {}
        if len(runs) == 1:
            current = next(iter(runs.values()))
        else:
            if self.fusion is None:
                raise ConfigError(
                    f"{len(runs)} retrievers ({', '.join(runs)}) need a fusion method"
                )
            current = out["fusion"] = (
                self.fusion.fuse_queries(queries, runs, k)  # a router: per-query weights
                if isinstance(self.fusion, QueryConditioned)
                else self.fusion.fuse(runs, k)
            )
        for name, stage in self.postprocessors.items():
            current = out[name] = stage.process(queries, current, self.chunks)
        return out

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
        ``QueryMetadataAware`` stages see the fields they declare (``as_of``)."""
        k = int(k or self.retrieve_k)
        self.set_query_metadata(query_metadata)
        seconds: dict[str, float] = {}
        t0 = time.perf_counter()
        transformed = self.transform_queries(queries)
        variants = {name: self.query_texts(transformed, name) for name in self.retrievers}
        seconds["query_transforms"] = time.perf_counter() - t0
        runs: dict[str, Run] = {}
        latencies: dict[str, list[float]] = {}
        from_cache: dict[str, bool] = {}
        for name in self.retrievers:
            t1 = time.perf_counter()
            runs[name], latencies[name], from_cache[name] = (
                self._variant_run(name, transformed, variants[name], k, latency_queries)
                if variants[name]
                else self._retriever_run(name, transformed, k, latency_queries)
            )
            seconds[name] = time.perf_counter() - t1
        t2 = time.perf_counter()
        later = self._after_retrieval(transformed, runs, k)
        seconds["after_retrieval"] = time.perf_counter() - t2
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
        all_runs = {**runs, **later}
        final = list(all_runs.values())[-1]
        notes: dict[str, dict[str, Any]] = {}
        for stage in [*self.retrievers.values(), *self.postprocessors.values()]:
            if isinstance(stage, Annotating):  # an adapter retriever's unmapped sources too
                for qid, ann in stage.annotations.items():
                    notes.setdefault(qid, {}).update(ann)
        result = RetrievalResult(
            MappingProxyType(transformed),
            MappingProxyType(all_runs),
            final,
            latency,
            MappingProxyType(from_cache),
            MappingProxyType(seconds),
            MappingProxyType(stats),
            annotations=MappingProxyType(notes),
        )
        return result if self.fallback is None else self._chain(result, queries, k, query_metadata)

    def _chain(
        self,
        result: RetrievalResult,
        queries: Mapping[str, str],
        k: int,
        query_metadata: Mapping[str, Mapping[str, Any]] | None,
    ) -> RetrievalResult:
        """``result`` walked through the fallback chain: each level runs the original query
        texts (its own transforms, if it keeps them) over the whole set, through its cache."""
        assert self.fallback is not None
        t0 = time.perf_counter()
        level_results: dict[str, RetrievalResult] = {}

        def run_level(level: FallbackLevel) -> RetrievalResult:
            level_results[level.name] = level.pipeline.run(queries, k, 0, query_metadata)
            return level_results[level.name]

        chain = self.fallback.resolve(result, run_level, list(queries))
        # a level's own stage stats are kept under its name; the chain's counters as fallback/...
        stats = dict(result.stats)
        for name, sub in level_results.items():
            stats.update({f"fallback/{name}/{k_}": v for k_, v in sub.stats.items()})
        ms = 1000 * (time.perf_counter() - t0) / max(len(queries), 1)
        stats.update({f"fallback/{k_}": v for k_, v in chain.stats.items()})
        stats["fallback/ms_per_query"] = ms
        seconds = {**result.seconds, "fallback": time.perf_counter() - t0}
        # only the chain's outcome joins the stage runs: a level's run over another corpus is no
        # step of this pipeline's (miss attribution reads the runs as a chain of stages)
        runs = {**result.runs, "fallback": chain.final}
        # each query's annotations come from the level that answered it (none when refused)
        by_level = [result, *(level_results.get(lv.name) for lv in self.fallback.levels)]
        notes = {
            qid: source.annotations[qid]
            for qid, n in chain.level.items()
            if n < len(by_level)
            and (source := by_level[n]) is not None
            and qid in source.annotations
        }
        return RetrievalResult(
            result.queries,
            MappingProxyType(runs),
            chain.final,
            result.latency_ms,
            result.from_cache,
            MappingProxyType(seconds),
            MappingProxyType(stats),
            MappingProxyType(dict(chain.level)),
            annotations=MappingProxyType(notes),
        )

    def retrieve(
        self, queries: Mapping[str, str], k: int | None = None
    ) -> tuple[Run, dict[str, Run]]:
        """Final run and the per-retriever runs it was fused from (``run`` without latencies)."""
        result = self.run(queries, k)
        return result.final, {n: result.runs[n] for n in self.retrievers}
