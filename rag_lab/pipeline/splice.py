"""An edit of a few records in records files (JSON lines), spliced into the chunk set the
corpus' note names instead of reading the corpus again: each line whose digest the note holds
keeps its document's chunks and ingest row; only the other lines are parsed (``RecordLines``),
completed, chunked and tagged (``splice``). ``line_records`` is what a whole read notes per
records file for the next edit (``rag_lab.pipeline.corpus``)."""

from __future__ import annotations

import codecs
import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_lab.cache import StageCache
from rag_lab.chunker.base import Chunker, PerDocument
from rag_lab.contract.base import ChunkTagging, Contract, DocumentWise, Separable
from rag_lab.errors import DataError
from rag_lab.parser.base import ParsedCorpus, ParsedFile, Parser, RecordLines, Selective
from rag_lab.pipeline.contract_rows import ContractRows, document_digest
from rag_lab.pipeline.corpus_entries import MAX_DELTA_CHAIN, chunk_entry_in
from rag_lab.pipeline.edits import Lineage, chunk_digest
from rag_lab.pipeline.ingest import COUNTED as COUNTED_STATS
from rag_lab.pipeline.ingest import ingest_report
from rag_lab.types import Chunk, Document, document_to_dict

# the ingest totals (n_<name>) that come with a corpus warning: a corpus with any is read whole
_WARNED = ("skipped_files", "unread_files", "skipped_links", "empty_documents", "contract_problems")


def _record_lines(path: Path) -> tuple[list[bytes], list[str]] | None:
    """The lines of a records file as ``read_lines`` numbers them, and a digest of each;
    ``None`` where its line breaks or a byte order mark could make them differ (a ``\\r``)."""
    data = path.read_bytes()
    if b"\r" in data or data.startswith(codecs.BOM_UTF8):
        return None
    lines = data.split(b"\n")
    if lines and not lines[-1]:  # the last line's break ends it, it starts no other
        lines.pop()
    return lines, [hashlib.blake2b(line, digest_size=12).hexdigest() for line in lines]


def line_records(path: Path, parsed: ParsedFile) -> tuple[list[str], list[str]] | None:
    """Per line of a records file parsed whole: its digest and the id of the document it holds
    (``""``: none); ``None`` when a document's ``file:line`` does not name one of its lines."""
    read = _record_lines(path)
    if read is None:
        return None
    lines, digests = read
    ids = [""] * len(lines)
    for where, doc in parsed.documents:
        head, _, number = where.rpartition(":")
        if head != str(path) or not number.isdigit() or not 1 <= int(number) <= len(lines):
            return None
        ids[int(number) - 1] = doc.doc_id
    return digests, ids


# what ``_new_records`` reads: each document in order (its id; the parsed document where its
# line is new, else None), where the new ones were read, each file's line records, the new
# records per file
NewRecords = tuple[
    list[tuple[str, Document | None]], dict[str, str], dict[str, Any], list[ParsedFile]
]


def _new_records(
    sources: Sequence[Path],
    root: Path,
    parsers: Sequence[RecordLines],
    known_lines: Mapping[str, tuple[list[str], list[str]]],
) -> NewRecords | None:
    """The records files' documents in order, the lines ``known_lines`` (a corpus note's
    records) holds by digest standing for their documents, the others parsed alone; ``None``
    where the whole read must decide (a line that does not parse or decode, an empty text)."""
    order: list[tuple[str, Document | None]] = []
    where: dict[str, str] = {}
    records: dict[str, Any] = {}
    parsed_files: list[ParsedFile] = []
    for path, own in zip(sources, parsers):
        read = _record_lines(path)
        if read is None:
            return None
        lines, digests = read
        known = dict(zip(*known_lines[str(path)]))
        ids: list[str] = []
        fresh: list[tuple[str, Document]] = []
        t0 = time.perf_counter()
        for number, (line, digest) in enumerate(zip(lines, digests), 1):
            if digest in known:
                ids.append(known[digest])
                if known[digest]:
                    order.append((known[digest], None))
                continue
            try:
                doc = own.parse_record(path, root, number, line.decode("utf-8"))
            except (DataError, UnicodeDecodeError):
                return None  # the whole read reports it as it does
            if doc is None:
                ids.append("")
                continue
            if not doc.text.strip():
                return None
            ids.append(doc.doc_id)
            order.append((doc.doc_id, doc))
            where[doc.doc_id] = f"{path}:{number}"
            fresh.append((where[doc.doc_id], doc))
        records[str(path)] = (digests, ids)
        if fresh:
            parsed_files.append(ParsedFile(str(path), tuple(fresh), time.perf_counter() - t0))
    return order, where, records, parsed_files


@dataclass(frozen=True)
class Spliced:
    """A spliced read: the chunks, the ingest report, a digest per chunk and each file's line
    records (for the corpus' note), and the documents entry written as the edit of the one the
    note names (``(key, a digest per document, chain depth)``; ``None``: none written)."""

    chunks: tuple[Chunk, ...]
    ingest: dict[str, Any]
    digests: dict[str, str]
    records: dict[str, Any]
    documents: tuple[str, dict[str, str], int] | None


def splice(
    sources: Sequence[Path],
    root: Path,
    prior: Lineage | None,
    docs_key: str,
    parser: Parser,
    chunker: Chunker,
    contract: Contract | None,
    contract_rows: ContractRows,
) -> Spliced | None:
    """An edit of a few records in records files, worked out from the chunk set the corpus'
    note names (``prior``). Writes the documents entry ``docs_key`` as its edit of the note's
    (``Spliced.documents``) through the cache of ``contract_rows``, whose ``counts`` receive
    what it parsed, completed and tagged (the caller restores them when it returns ``None``).
    ``None`` (the whole read runs instead) unless every file is a records file the note
    describes, the corpus had no warnings (empty documents, refused or unread files, contract
    problems), the chunker chunks one document at a time (``PerDocument``), the contract (if
    any) can say that nothing it checks across documents involves the new ones (``Separable``),
    and the new records are well-formed, non-empty and give no problems or repeated ids."""
    cache, counts = contract_rows.cache, contract_rows.counts
    if cache is None or prior is None or not prior.records:
        return None
    if [str(p) for p in sources] != list(prior.records):
        return None
    if not (isinstance(chunker, PerDocument) and chunker.per_document):
        return None
    if contract is not None and not (
        isinstance(contract, DocumentWise) and isinstance(contract, Separable)
    ):
        return None
    parsers: list[RecordLines] = []
    for path in sources:
        own = getattr(parser, "parsers", {}).get(path.suffix.lower(), parser)
        if path.suffix.lower() not in parser.suffixes or not isinstance(own, RecordLines):
            return None
        if isinstance(parser, Selective) and parser.unread(path):
            return None
        parsers.append(own)
    base = cache.get_decoded("chunks", prior.chunks_key, chunk_entry_in(cache))
    if base is None:
        cache.misses["chunks"] -= 1  # a look for the earlier set, not this stage's entry
        return None
    cache.hits["chunks"] -= 1
    held_chunks, held_ingest = base
    totals = dict(held_ingest.get("totals") or {})
    if any(totals.get(f"n_{k}") for k in _WARNED) or not held_ingest.get("documents"):
        return None
    rows = {r["doc_id"]: r for r in held_ingest["documents"]}
    held: dict[str, list[Chunk]] = {}
    for c in held_chunks:
        held.setdefault(c.doc_id, []).append(c)
    read = _new_records(sources, root, parsers, prior.records)
    if read is None:
        return None
    order, where, records, parsed_files = read
    every = [i for i, _ in order]
    if len(set(every)) != len(every):
        return None
    if any(i not in held or i not in rows for i, d in order if d is None):
        return None
    new_docs = [d for _, d in order if d is not None]
    completed = list(new_docs)
    parsed_digests: dict[str, str] = {}
    if contract is not None and new_docs:
        assert isinstance(contract, Separable)
        checked = contract_rows.check(contract, new_docs, where, parsed_digests)
        if checked.problems or not all(contract.standalone(d) for d in checked.documents):
            return None
        completed = list(checked.documents)
    new_chunks = tuple(chunker.chunk(completed))
    if isinstance(contract, ChunkTagging) and new_chunks:
        new_chunks = contract_rows.tag(contract, new_chunks)
    by_doc: dict[str, list[Chunk]] = {}
    for c in new_chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    chunks: list[Chunk] = []
    digests_out: dict[str, str] = {}
    for doc_id, doc in order:
        if doc is None:
            for c in held[doc_id]:
                if c.chunk_id not in prior.digests:
                    return None
                digests_out[c.chunk_id] = prior.digests[c.chunk_id]
            chunks += held[doc_id]
        else:
            for c in by_doc.get(doc_id, []):
                digests_out[c.chunk_id] = chunk_digest(c)
            chunks += by_doc.get(doc_id, [])
    fresh_rows = ingest_report(
        ParsedCorpus(tuple(new_docs), files=tuple(parsed_files)), completed, ()
    )["documents"]
    rows.update((r["doc_id"], r) for r in fresh_rows)
    doc_rows = [rows[i] for i in every]
    for key in COUNTED_STATS:
        totals[f"n_{key}"] = sum(int(r.get(key, 0)) for r in doc_rows)
    counts["parsed_files"] += len(parsed_files)
    counts["parsed_documents"] += len(new_docs)
    ingest = {**held_ingest, "totals": totals, "documents": doc_rows}
    documents = _documents_edit(cache, prior, docs_key, order, completed, parsed_digests, ingest)
    return Spliced(tuple(chunks), ingest, digests_out, records, documents)


def _documents_edit(
    cache: StageCache,
    prior: Lineage,
    docs_key: str,
    order: Sequence[tuple[str, Document | None]],
    completed: Sequence[Document],
    parsed_digests: dict[str, str],
    ingest: Mapping[str, Any],
) -> tuple[str, dict[str, str], int] | None:
    """Write the documents entry ``docs_key`` of a spliced read as its edit of the one the note
    names (``completed``: the new documents; ``order``: every document); what the note records of
    it (key, digests, depth), ``None`` (nothing written) when that entry is gone or too deep."""
    if (
        not prior.documents_key
        or prior.docs_depth >= MAX_DELTA_CHAIN
        or not all(i in prior.doc_digests for i, d in order if d is None)
        or not cache.path("documents", prior.documents_key, "json.gz").is_file()
    ):
        return None
    for _, d in order:
        if d is not None:
            parsed_digests.setdefault(d.doc_id, document_digest(d))
    entry = {
        "documents": [document_to_dict(d) for d in completed],
        "warnings": [],
        "ingest": ingest,
        "format": 3,
        "base": prior.documents_key,
        "ids": [i for i, _ in order],
    }
    cache.put_json("documents", docs_key, entry)
    digests = {i: prior.doc_digests[i] if d is None else parsed_digests[i] for i, d in order}
    return docs_key, digests, prior.docs_depth + 1
