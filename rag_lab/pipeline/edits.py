"""What changed since the corpus an earlier run indexed: the edit that indexes and per-query
results follow instead of starting again.

Each corpus (its folder, parser, contract and chunker settings: ``keys.lineage_key``) has a
note in the stage cache naming the chunk set last built for it, with a digest per chunk. A later
run over an edited corpus diffs its chunks against that note (``ChunkDiff``): the retrievers
that can (``IncrementalRetriever``) update the earlier index in place, and carry the earlier
per-query rows that the edit provably leaves exact (``rag_lab.pipeline.query``). The note is a
hint, never trusted: the earlier index must hold exactly the chunk ids the note lists.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_lab.cache import StageCache
from rag_lab.types import Chunk

# an edit touching more than this share of the chunks is indexed from scratch (cheaper)
MAX_CHANGED_SHARE = 0.5


def chunk_digest(chunk: Chunk) -> str:
    """What a retriever can see of a chunk: every field, metadata in a canonical spelling."""
    meta = json.dumps(dict(chunk.metadata), sort_keys=True, default=str, ensure_ascii=False)
    parts = (chunk.doc_id, chunk.text, str(chunk.start), str(chunk.end), chunk.title,
             chunk.section, meta)  # fmt: skip
    h = hashlib.blake2b(digest_size=12)
    for p in parts:
        b = p.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


@dataclass(frozen=True)
class ChunkDiff:
    """The chunk set ``base_key`` (holding ``base_ids``) against the current one: ``stale``, the
    earlier ids whose chunk changed or went; ``fresh``, the current ids that are new or changed
    (in corpus order)."""

    base_key: str
    base_ids: frozenset[str]
    stale: frozenset[str]
    fresh: tuple[str, ...]


@dataclass(frozen=True)
class Lineage:
    """The note of one corpus: its last chunk set's key and a digest per chunk id, how many
    chunks entries in a row its entry is read through (``depth``); and the same of its last
    documents entry (a digest per document id of the parsed document, when the read computed
    them); and, per records file, a digest per line with the document it holds."""

    chunks_key: str
    digests: Mapping[str, str]
    depth: int = 0
    documents_key: str = ""
    doc_digests: Mapping[str, str] = field(default_factory=dict)
    docs_depth: int = 0
    # per records file (its path), a digest per line and the id of the document each line
    # holds ("": none): what an edit of a few records re-parses (rag_lab.pipeline.corpus)
    records: Mapping[str, tuple[list[str], list[str]]] = field(default_factory=dict)

    @classmethod
    def read(cls, cache: StageCache, key: str) -> Lineage | None:
        raw = cache.get_note(key)
        if not isinstance(raw, dict):
            return None
        try:
            return cls(
                str(raw["chunks_key"]),
                dict(zip(raw["ids"], raw["digests"], strict=True)),
                int(raw.get("depth", 0)),
                str(raw.get("documents_key", "")),
                dict(zip(raw.get("doc_ids", []), raw.get("doc_digests", []), strict=True)),
                int(raw.get("docs_depth", 0)),
                {
                    str(p): (list(d), list(i))
                    for p, (d, i) in (raw.get("records") or {}).items()
                    if len(d) == len(i)
                },
            )
        except (KeyError, TypeError, ValueError):
            return None

    def write(self, cache: StageCache, key: str) -> None:
        value: dict[str, Any] = {
            "chunks_key": self.chunks_key,
            "ids": list(self.digests),
            "digests": list(self.digests.values()),
            "depth": self.depth,
            "documents_key": self.documents_key,
            "doc_ids": list(self.doc_digests),
            "doc_digests": list(self.doc_digests.values()),
            "docs_depth": self.docs_depth,
            "records": {p: [d, i] for p, (d, i) in self.records.items()},
        }
        cache.put_note(key, value)

    def diff(self, chunks: Sequence[Chunk], digests: Mapping[str, str]) -> ChunkDiff | None:
        """The edit from this note's chunk set to ``chunks``; ``None`` when it is the same set,
        or when more than ``MAX_CHANGED_SHARE`` of the chunks changed."""
        fresh = tuple(
            c.chunk_id for c in chunks if self.digests.get(c.chunk_id) != digests[c.chunk_id]
        )
        stale = frozenset(c for c, d in self.digests.items() if digests.get(c) != d)
        if not fresh and not stale:
            return None
        if len(fresh) > MAX_CHANGED_SHARE * max(len(chunks), 1):
            return None
        return ChunkDiff(self.chunks_key, frozenset(self.digests), stale, fresh)
