"""Chunk-set entries: columns (format 2) decode to the frozen chunks they were made from; an entry
of an earlier format is a miss; a multirun's jobs decode an entry once
(``StageCache.get_decoded``)."""

from __future__ import annotations

from rag_lab.cache import StageCache
from rag_lab.chunker import FixedSizeChunker
from rag_lab.pipeline.corpus_entries import chunk_columns, chunk_entry
from rag_lab.types import chunk_to_dict


def test_columns_decode_to_the_same_chunks_and_earlier_formats_are_misses(toy_docs):
    chunks = FixedSizeChunker(size=40, overlap=8).chunk(toy_docs)
    assert len({c.doc_id for c in chunks}) > 1 and any(c.metadata for c in chunks)
    ingest = {"totals": {"documents": len(toy_docs)}}
    columns = {"format": 2, "columns": chunk_columns(chunks), "ingest": ingest}
    dicts = {"chunks": [chunk_to_dict(c) for c in chunks], "ingest": ingest}
    bare = [chunk_to_dict(c) for c in chunks]  # a 0.2 entry
    got, got_report = chunk_entry(columns)
    assert list(got) == chunks and got_report == ingest
    assert chunk_entry(dicts) is None and chunk_entry(bare) is None
    # one metadata value per document, not per chunk
    assert len(columns["columns"]["metadata"]) <= len(toy_docs) < len(chunks)


def test_an_entry_is_decoded_once_per_process_and_counted_as_a_read(tmp_path):
    cache = StageCache(tmp_path)
    cache.put_json("chunks", "k", {"chunks": [{"chunk_id": "a#0"}]})
    calls = []

    def decode(raw):
        calls.append(1)
        return tuple(c["chunk_id"] for c in raw["chunks"])

    first = cache.get_decoded("chunks", "k", decode)
    second = cache.get_decoded("chunks", "k", decode)
    assert first == second == ("a#0",) and second is first and len(calls) == 1
    assert cache.stats()["cache/chunks/hits"] == 2
    assert (
        cache.stats()["cache_bytes_read"] == 2 * cache.path("chunks", "k", "json.gz").stat().st_size
    )
    cache.put_json("chunks", "k", {"chunks": [{"chunk_id": "a#0"}, {"chunk_id": "a#1"}]})
    assert cache.get_decoded("chunks", "k", decode) == ("a#0", "a#1")  # rewritten: decoded again
    cache.path("chunks", "k", "json.gz").unlink()
    assert cache.get_decoded("chunks", "k", decode) is None  # gone: a miss, not the old value
    assert cache.stats()["cache/chunks/misses"] == 1
