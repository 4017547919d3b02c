"""Each retriever's index over the current chunks: restored from the stage cache (``indexes``) or
from an export's folders, built otherwise, and never trusted when it does not index exactly the
current chunks.

Indexing is lazy: a retriever whose run comes from the cache is never indexed (``Indexes.ensure``
is called by the query side only when a query must be searched).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rag_lab.cache import StageCache, keys
from rag_lab.errors import ConfigError
from rag_lab.pipeline.edits import ChunkDiff
from rag_lab.protocols import Identified, Measured
from rag_lab.retrievers.base import IncrementalRetriever, PersistentRetriever, Retriever
from rag_lab.types import Chunk

log = logging.getLogger(__name__)


def identity(stage: object) -> Any:
    """What defines a stage's output beyond its config (``Identified``), else ``None``."""
    return stage.identity if isinstance(stage, Identified) else None


class Indexes:
    """The retrievers' indexes over one chunk set (``set_corpus``), through ``cache``.

    ``configs`` are the retrievers' resolved configs (they key the cache entries with the
    chunks' key); ``seconds`` holds ``<retriever>/index_seconds`` of each index built or
    restored."""

    def __init__(
        self,
        retrievers: Mapping[str, Retriever],
        cache: StageCache | None = None,
        configs: Mapping[str, Any] | None = None,
    ) -> None:
        self.retrievers = retrievers
        self.cache = cache
        self.configs = dict(configs or {})
        self.chunks: Mapping[str, Chunk] = {}
        self.chunks_key = ""
        self.seconds: dict[str, float] = {}
        self._indexed: set[str] = set()
        self.generation = 0  # bumped whenever the chunks change (what was derived from them goes)
        self.diff: Callable[[], ChunkDiff | None] = lambda: None
        # per retriever updated in place, the chunks key of the index it was updated from
        self.updated_from: dict[str, str] = {}
        # seconds spent indexing in this process, all retrievers together: a retriever indexed
        # lazily inside a run reports it as index_seconds, not again as retrieve time
        self.spent = 0.0

    def set_corpus(
        self,
        chunks: Mapping[str, Chunk],
        chunks_key: str,
        diff: Callable[[], ChunkDiff | None] | None = None,
    ) -> None:
        """The chunks to index (every retriever must be indexed again) and their cache key
        (``""``: indexes are not cached); ``diff``: the edit since an earlier chunk set whose
        cached indexes an ``IncrementalRetriever`` updates instead of indexing again."""
        self.chunks, self.chunks_key = chunks, chunks_key
        self.diff = diff or (lambda: None)
        self._indexed = set()
        self.updated_from = {}
        self.generation += 1

    def ensure(self, name: str) -> None:
        """Index retriever ``name``: restored from the stage cache when it can persist its index
        and the entry loads, built (and stored) otherwise."""
        if name in self._indexed:
            return
        if not self.chunks:
            raise ConfigError(
                "the pipeline has no corpus: load_corpus, set_chunks or restore first"
            )
        retriever = self.retrievers[name]
        t0 = time.perf_counter()
        cache = self.cache if self.chunks_key else None
        if cache is None or not isinstance(retriever, PersistentRetriever):
            retriever.index(list(self.chunks.values()))
        else:
            key = keys.index_key(self.configs.get(name), identity(retriever), self.chunks_key)

            def build() -> bool:
                if not self._update(cache, name, retriever):
                    retriever.index(list(self.chunks.values()))
                return True

            def store(_: bool) -> None:
                try:
                    cache.put_dir("indexes", key, retriever.save_index)
                except NotImplementedError:
                    pass

            cache.memo(
                "indexes",
                key,
                build,
                read=lambda: self._restore(cache, retriever, key),
                write=store,
            )
        self.seconds[f"{name}/index_seconds"] = time.perf_counter() - t0
        self.spent += self.seconds[f"{name}/index_seconds"]
        self._indexed.add(name)
        stats = retriever.stats if isinstance(retriever, Measured) else {}
        log.info(
            "indexed %d chunks with %s: %s",
            len(self.chunks),
            name,
            {k: round(v, 3) for k, v in stats.items()},
        )

    def _update(self, cache: StageCache, name: str, retriever: PersistentRetriever) -> bool:
        """Update the cached index of the chunk set the edit started from, when there is one
        and the retriever can (``IncrementalRetriever``); ``False``: index from scratch."""
        if not isinstance(retriever, IncrementalRetriever):
            return False
        diff = self.diff()
        if diff is None:
            return False
        base = keys.index_key(self.configs.get(name), identity(retriever), diff.base_key)
        entry = cache.get_dir("indexes", base)
        if entry is None:
            cache.misses["indexes"] -= 1  # a look for a base, not this stage's entry
            return False
        try:
            retriever.load_index(entry)
            if set(retriever.chunk_ids) != diff.base_ids:
                raise ValueError("it does not index the chunk set its note lists")
        except Exception as exc:  # any library's reading error; the note is only a hint
            log.info("index %s of %s not updated in place (%s)", base, name, exc)
            return False
        if not retriever.update(list(self.chunks.values()), diff.stale):
            return False
        self.updated_from[name] = diff.base_key
        log.info("updated the %s index in place: %d chunks new or changed", name, len(diff.fresh))
        return True

    def ensure_all(self) -> None:
        for name in self.retrievers:
            self.ensure(name)

    def _restore(self, cache: StageCache, retriever: PersistentRetriever, key: str) -> bool | None:
        """``True`` when ``retriever`` was restored from the cached index ``key``; ``None`` on a
        miss, or when the entry does not load or does not index exactly the current chunks (the
        entry is then dropped with a warning: truncated or garbage files are rebuilt, never
        trusted)."""
        entry = cache.get_dir("indexes", key)
        if entry is None:
            return None
        try:
            retriever.load_index(entry)
            held = retriever.chunk_ids
            if len(held) != len(self.chunks) or set(held) != set(self.chunks):
                raise ValueError(f"it indexes {len(held)} chunk ids, not the {len(self.chunks)}")
        except Exception as exc:  # any library's reading error: faiss, bm25s, json, numpy
            cache.corrupt("indexes", entry, exc, was_hit=True)
            return None
        return True

    def restore(self, index_dirs: Mapping[str, Path]) -> None:
        """Load every retriever's saved index (an export, a server): nothing is encoded.
        ``ConfigError`` when a retriever has no folder, cannot load one, or its index names chunks
        that the corpus lacks."""
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
