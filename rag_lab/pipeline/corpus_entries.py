"""The corpus' cache entries as they are written and read back: the chunks entry (columns,
format 2; the edit of an earlier chunk set, format 3) and the documents entry (whole, or the edit
of an earlier documents entry, format 3), each edit read through the entry it edits, at most
``MAX_DELTA_CHAIN`` in a row (``rag_lab.pipeline.corpus``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rag_lab.cache import StageCache
from rag_lab.pipeline.edits import MAX_CHANGED_SHARE, Lineage
from rag_lab.types import Chunk

# -- the chunks entry: columns (format 2) ------------------------------------------------------
_CHUNK_COLUMNS = ("chunk_id", "doc_id", "text", "start", "end", "title", "section", "metadata")


def chunk_columns(chunks: Sequence[Chunk]) -> dict[str, list[Any]]:
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


def chunk_entry(raw: Any) -> tuple[tuple[Chunk, ...], Mapping[str, Any]] | None:
    """A ``chunks`` cache entry as frozen chunks and its ingest report; ``None`` (a miss) for an
    entry of another format (written by rag_lab 0.1-0.2)."""
    if not isinstance(raw, dict) or "columns" not in raw:
        return None
    cols = raw["columns"]
    metas = [cols["metadata"][i] for i in cols["metadata_index"]]
    rows = zip(*(cols[f] for f in _CHUNK_COLUMNS[:-1]), metas, strict=True)
    return tuple(Chunk(*row) for row in rows), raw.get("ingest") or {}


def json_entry(cache: StageCache | None, namespace: str, key: str) -> dict[str, Any] | None:
    """A JSON entry that is a mapping (the current formats); anything else (a list, written by
    rag_lab 0.1) is a miss, recomputed and overwritten."""
    if cache is None:
        return None
    raw = cache.get_json(namespace, key)
    if raw is not None and not isinstance(raw, dict):
        cache.unusable(namespace)
        return None
    return raw


# a chunks entry written as the edit of an earlier one is read through it: at most this many
# entries in a row, then one is written whole
MAX_DELTA_CHAIN = 8


def chunk_entry_in(cache: StageCache) -> Callable[[Any], Any]:
    """``chunk_entry``, also for an entry written as the edit of an earlier chunk set (format 3:
    ``base``, every chunk id in order, the columns of the chunks that changed): the earlier set
    is read (decoded once per process) and the changed chunks put in place. ``None`` (a miss)
    when the earlier set is gone or does not hold an unchanged id."""

    def decode(raw: Any) -> tuple[tuple[Chunk, ...], Mapping[str, Any]] | None:
        if not isinstance(raw, dict) or not raw.get("base"):
            return chunk_entry(raw)
        base = cache.get_decoded("chunks", str(raw["base"]), decode)
        if base is None:
            return None
        cache.hits["chunks"] -= 1  # part of reading this entry, not a read of its own
        changed = chunk_entry({"columns": raw["columns"]})
        if changed is None:
            return None
        held = {c.chunk_id: c for c in base[0]}
        held.update((c.chunk_id, c) for c in changed[0])
        try:
            chunks = tuple(held[i] for i in raw["ids"])
        except KeyError:
            return None
        return chunks, raw.get("ingest") or {}

    return decode


def chunks_entry(
    cache: StageCache,
    value: tuple[tuple[Chunk, ...], Mapping[str, Any]],
    digests: Mapping[str, str],
    prior: Lineage | None,
    chunks_key: str,
) -> tuple[dict[str, Any], int]:
    """The chunks entry to write and its chain depth: the edit of the corpus' previous chunk set
    (``prior``) when that set's entry is there and at most ``MAX_CHANGED_SHARE`` of the chunks
    changed (an edit writes its size), else the whole set."""
    chunks, ingest = value
    if (
        prior is not None
        and prior.chunks_key != chunks_key
        and prior.depth < MAX_DELTA_CHAIN
        and cache.path("chunks", prior.chunks_key, "json.gz").is_file()
    ):
        changed = [c for c in chunks if prior.digests.get(c.chunk_id) != digests[c.chunk_id]]
        if len(changed) <= MAX_CHANGED_SHARE * len(chunks):
            entry = {
                "format": 3,
                "base": prior.chunks_key,
                "ids": [c.chunk_id for c in chunks],
                "columns": chunk_columns(changed),
                "ingest": ingest,
            }
            return entry, prior.depth + 1
    return {"format": 2, "columns": chunk_columns(chunks), "ingest": ingest}, 0


def documents_entry(
    cache: StageCache,
    entry: dict[str, Any],
    digests: Mapping[str, str],
    prior: Lineage | None,
    key: str,
) -> tuple[dict[str, Any], int]:
    """The documents entry to write and its chain depth: the edit of the corpus' previous
    documents entry (``prior``; the documents whose parsed content changed, by ``digests``) when
    that entry is there, else the whole entry."""
    docs = entry["documents"]
    if (
        digests
        and prior is not None
        and prior.documents_key
        and prior.documents_key != key
        and prior.docs_depth < MAX_DELTA_CHAIN
        and cache.path("documents", prior.documents_key, "json.gz").is_file()
    ):
        ids = [d["doc_id"] for d in docs]
        changed = [d for d, i in zip(docs, ids) if prior.doc_digests.get(i) != digests.get(i)]
        if len(changed) <= MAX_CHANGED_SHARE * len(docs):
            delta = {**entry, "format": 3, "base": prior.documents_key, "ids": ids}
            delta["documents"] = changed
            return delta, prior.docs_depth + 1
    return entry, 0


def read_documents(cache: StageCache, key: str, depth: int = 0) -> dict[str, Any] | None:
    """A documents entry, an edit (format 3) read through the entry it edits; ``None``: a miss
    (an earlier format, or an edit whose base is gone)."""
    raw = json_entry(cache, "documents", key) if depth == 0 else _quiet_entry(cache, key)
    if raw is None or not raw.get("base"):
        return raw
    base = read_documents(cache, str(raw["base"]), depth + 1)
    if base is None or depth > MAX_DELTA_CHAIN:
        if depth == 0:
            cache.unusable("documents")
        return None
    held = {d["doc_id"]: d for d in base["documents"]}
    held.update((d["doc_id"], d) for d in raw["documents"])
    try:
        return {**raw, "documents": [held[i] for i in raw["ids"]]}
    except KeyError:
        if depth == 0:
            cache.unusable("documents")
        return None


def _quiet_entry(cache: StageCache, key: str) -> dict[str, Any] | None:
    """An entry read as part of another (not counted)."""
    raw = cache.get_note_at("documents", key)
    return raw if isinstance(raw, dict) else None
