"""The corpus side of a pipeline: files → documents → contract → chunks, each step through the
stage cache.

    files ──parse (per file: ``parsed_files``)──▶ documents ──contract──▶ (``documents``)
          ──chunk──▶ chunks (``chunks``)

``CorpusLoader.load`` returns a frozen ``LoadedCorpus``: the chunks, the key every downstream cache
entry (indexes, runs) hangs from, the ingest report and the corpus warnings. Each step is read back
when its key hits: a chunker sweep re-parses nothing, an edit of one file re-parses that file only.

``read_corpus`` is the corpus-level loop over the files (duplicate ids, empty documents, files the
parser refuses under ``parser.on_error=skip``); ``parse_corpus`` its documents with the warnings
logged (tests and notebooks).
"""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from rag_lab._version import __version__
from rag_lab.cache import StageCache, keys, memo
from rag_lab.chunker.base import Chunker, PerDocument
from rag_lab.contract.base import (
    Checked,
    ChunkTagging,
    Contract,
    DocumentWise,
    Problem,
    Separable,
)
from rag_lab.errors import ConfigError, DataError
from rag_lab.io.files import fingerprint_files
from rag_lab.parser.base import (
    ON_EMPTY,
    ON_ERROR,
    ParsedCorpus,
    ParsedFile,
    Parser,
    Plain,
    RecordLines,
    Selective,
    parse_file,
)
from rag_lab.pipeline.edits import MAX_CHANGED_SHARE, ChunkDiff, Lineage, chunk_digest
from rag_lab.pipeline.ingest import COUNTED as COUNTED_STATS
from rag_lab.pipeline.ingest import ingest_report
from rag_lab.protocols import Identified
from rag_lab.runtime import progress
from rag_lab.types import Chunk, Document, document_from_dict, document_to_dict

log = logging.getLogger(__name__)


def read_corpus(
    parser: Parser,
    sources: Iterable[Path],
    root: Path,
    on_empty: str = "skip",
    on_error: str = "fail",
    parse: Callable[[Path], ParsedFile] | None = None,
    left_out: Sequence[tuple[str, str]] = (),
) -> ParsedCorpus:
    """Parse every source whose suffix the parser reads.

    Refused (``DataError``): a repeated document id (both places named, ``file:line`` where the
    parser knows lines); a corpus with no records (the empty file named); with
    ``on_empty="fail"``, a document with empty or blank text; a corpus whose documents are all
    empty. With ``on_empty="skip"`` (the default) empty documents are left out and counted.
    A file the parser refuses (``DataError``: corrupt, encrypted, not the format its suffix says)
    stops the read under ``on_error="fail"``; under ``skip`` it is left out whole, counted
    (``n_skipped_files``) and named in the warnings. ``ConfigError`` (a missing OCR engine) is
    never skipped. ``parse`` replaces ``parse_file`` (the loader's per-file cache).
    Counted and named in the warnings, never silently dropped: the sources no parser reads
    (another suffix; a ``Selective`` parser's files it does not read as configured) and
    ``left_out``, the entries the corpus folder's listing did not read (``(path, reason)``:
    symbolic links out of the folder, dangling or to a folder; hidden files).
    """
    if on_empty not in ON_EMPTY:
        raise ConfigError(f"dataset.on_empty={on_empty!r}: use one of {', '.join(ON_EMPTY)}")
    if on_error not in ON_ERROR:
        raise ConfigError(f"parser.on_error={on_error!r}: use one of {', '.join(ON_ERROR)}")
    parse_one = parse or (lambda p: parse_file(parser, p, root))
    docs: list[Document] = []
    origin: dict[str, str] = {}
    empty: list[tuple[str, str]] = []
    read: list[Path] = []
    skipped: list[Path] = []
    files: list[ParsedFile] = []
    refused: list[tuple[str, str]] = []
    shown = progress.bar(list(sources), desc="parse", unit="file")  # draws only for a slow read
    unread: list[tuple[str, str]] = []
    as_configured: list[tuple[str, str]] = []  # of a suffix the parser has, left out as set up
    links: list[tuple[str, str]] = []
    for where, why in left_out:
        (links if Path(where).is_symlink() else unread).append((where, why))
    for path in shown:
        shown.set_postfix_str(path.name, refresh=False)
        if path.suffix.lower() not in parser.suffixes:
            skipped.append(path)
            unread.append((str(path), f"no parser reads {path.suffix or 'a file without suffix'}"))
            continue
        why_not = parser.unread(path) if isinstance(parser, Selective) else None
        if why_not:
            unread.append((str(path), why_not))
            as_configured.append((str(path), why_not))
            continue
        read.append(path)
        try:
            parsed = parse_one(path)
        except DataError as exc:
            if on_error == "fail":
                raise
            refused.append((str(path), str(exc)))
            log.warning("skipped (parser.on_error=skip): %s", exc)
            continue
        files.append(parsed)
        for where, doc in parsed.documents:
            if doc.doc_id in origin:
                raise DataError(
                    f"{where}: duplicate document id {doc.doc_id!r} (first at {origin[doc.doc_id]})"
                )
            origin[doc.doc_id] = where
            if not doc.text.strip():
                if on_empty == "fail":
                    raise DataError(
                        f"{where}: document {doc.doc_id!r} has empty text "
                        "(dataset.on_empty=skip leaves such documents out)"
                    )
                empty.append((doc.doc_id, where))
                continue
            docs.append(doc)
    if not docs:
        raise DataError(
            _empty_corpus(root, parser, refused, empty, read, skipped, as_configured, links)
        )
    warnings: list[str] = []
    if empty:
        warnings.append(
            f"n_empty_documents={len(empty)}: documents with empty text left out of the corpus "
            f"(e.g. {empty[0][0]!r} at {empty[0][1]}; dataset.on_empty=fail refuses them)"
        )
    if refused:
        warnings.append(
            f"n_skipped_files={len(refused)}: files the parser refused, left out under "
            f"parser.on_error=skip (first: {refused[0][1]})"
        )
    if unread:
        warnings.append(
            f"n_unread_files={len(unread)}: files in the corpus that no parser read, left out "
            f"({_by_reason(unread)}); first: {unread[0][0]} (all in ingest_report.json)"
        )
    if links:
        warnings.append(
            f"n_skipped_links={len(links)}: symbolic links in the corpus folder left out "
            f"(first: {links[0][0]}: {links[0][1]}; all in ingest_report.json)"
        )
    return ParsedCorpus(
        tuple(docs),
        len(empty),
        tuple(warnings),
        tuple(files),
        tuple(refused),
        tuple(unread),
        tuple(links),
    )


def _by_reason(entries: Sequence[tuple[str, str]], shown: int = 3) -> str:
    """``2 x no parser reads .png, 1 x a hidden file``: the commonest reasons, counted."""
    counts = Counter(why for _, why in entries)
    text = ", ".join(f"{n} x {why}" for why, n in counts.most_common(shown))
    return text + (f", {len(counts) - shown} other reasons" if len(counts) > shown else "")


def _empty_corpus(
    root: Path,
    parser: Parser,
    refused: Sequence[tuple[str, str]],
    empty: Sequence[tuple[str, str]],
    read: Sequence[Path],
    skipped: Sequence[Path],
    as_configured: Sequence[tuple[str, str]] = (),
    links: Sequence[tuple[str, str]] = (),
) -> str:
    """Why a corpus has no documents, in one line."""
    if refused:
        return (
            f"empty corpus under {root}: every file was refused ({len(refused)} skipped "
            f"under parser.on_error=skip; first: {refused[0][1]})"
        )
    if empty:
        return (
            f"empty corpus under {root}: all {len(empty)} documents have empty text "
            f"(e.g. {empty[0][0]!r} at {empty[0][1]})"
        )
    if len(read) == 1:
        return f"{read[0]}: no records (empty corpus file)"
    if read:
        return f"empty corpus under {root}: no records in any of {len(read)} files (e.g. {read[0]})"
    if as_configured:  # files of a suffix the parser has, left out as set up (SQLite, no query)
        return (
            f"empty corpus under {root}: no file read ({as_configured[0][0]}: "
            f"{as_configured[0][1]})"
        )
    what = (
        f"{len(skipped)} files, none with a suffix in {sorted(parser.suffixes)}"
        if skipped
        else "no files"
    )
    if links:
        what += f"; {len(links)} links left out (first: {links[0][0]}: {links[0][1]})"
    return f"empty corpus under {root}: {what}"


def parse_corpus(
    parser: Parser, sources: Iterable[Path], root: Path, on_empty: str = "skip"
) -> list[Document]:
    """``read_corpus``'s documents; its warnings are logged."""
    corpus = read_corpus(parser, sources, root, on_empty)
    for w in corpus.warnings:
        log.warning(w)
    return list(corpus.documents)


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


def _entry(cache: StageCache | None, namespace: str, key: str) -> dict[str, Any] | None:
    """A JSON entry that is a mapping (the current formats); anything else (a list, written by
    rag_lab 0.1) is a miss, recomputed and overwritten."""
    if cache is None:
        return None
    raw = cache.get_json(namespace, key)
    if raw is not None and not isinstance(raw, dict):
        cache.unusable(namespace)
        return None
    return raw


# the ingest totals (n_<name>) that come with a corpus warning: a corpus with any is read whole
_WARNED = ("skipped_files", "unread_files", "skipped_links", "empty_documents", "contract_problems")

# the corpus read's counters (CorpusLoader.counts; metrics.json: cache/corpus/n_<name>)
COUNTS = ("parsed_files", "parsed_documents", "checked_documents", "tagged_chunks")


def document_digest(doc: Document) -> str:
    """A parsed document's content (every field), for its per-document rows."""
    spelled = orjson.dumps(document_to_dict(doc), option=orjson.OPT_SORT_KEYS, default=str)
    return hashlib.blake2b(spelled, digest_size=16).hexdigest()


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


def _chunks_entry(
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


def _documents_entry(
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


def _read_documents(cache: StageCache, key: str, depth: int = 0) -> dict[str, Any] | None:
    """A documents entry, an edit (format 3) read through the entry it edits; ``None``: a miss
    (an earlier format, or an edit whose base is gone)."""
    raw = _entry(cache, "documents", key) if depth == 0 else _quiet_entry(cache, key)
    if raw is None or not raw.get("base"):
        return raw
    base = _read_documents(cache, str(raw["base"]), depth + 1)
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


def _chunk_digests(
    chunks: Sequence[Chunk], documents: tuple[str, Mapping[str, str], int] | None
) -> dict[str, str]:
    """A digest per chunk: its document's, when this read worked those out (a chunk is its
    document's, completed and cut as the corpus' note is keyed: same document, same chunks),
    else its own fields (``chunk_digest``)."""
    docs = documents[1] if documents else {}
    if docs and all(c.doc_id in docs for c in chunks):
        return {c.chunk_id: "doc:" + docs[c.doc_id] for c in chunks}
    return {c.chunk_id: chunk_digest(c) for c in chunks}


def _differ(
    cache: StageCache,
    note_key: str,
    chunks: Sequence[Chunk],
    chunks_key: str,
    built: Mapping[str, Any],
) -> Callable[[], ChunkDiff | None]:
    """The edit since the chunk set the corpus' note named before this read (just rewritten
    when the chunks were built), worked out once when first asked."""
    computed = "digests" in built
    known: list[ChunkDiff | None] = []

    def diff() -> ChunkDiff | None:
        if not known:
            note = built.get("prior") if computed else Lineage.read(cache, note_key)
            if note is None or note.chunks_key == chunks_key:
                known.append(None)
            else:
                mine = built.get("digests") or {c.chunk_id: chunk_digest(c) for c in chunks}
                known.append(note.diff(chunks, mine))
        return known[0]

    return diff


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


def _line_records(path: Path, parsed: ParsedFile) -> tuple[list[str], list[str]] | None:
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


def _no_diff() -> ChunkDiff | None:
    return None


@dataclass(frozen=True)
class LoadedCorpus:
    """A corpus parsed, checked and chunked: ``key`` is the chunks' cache key (every index and run
    entry downstream hangs from it; ``""`` without a cache); ``ingest`` the ingest report;
    ``warnings`` the corpus warnings (empty documents, refused files, contract problems; an entry
    read back from the cache brings none); ``seconds`` per step (``parse``, ``chunk``)."""

    chunks: tuple[Chunk, ...]
    key: str
    ingest: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    seconds: Mapping[str, float] = field(default_factory=dict)
    # the edit since the chunk set this corpus was last built as (rag_lab.pipeline.edits),
    # worked out when first asked (an index that misses); None: none known
    diff: Callable[[], ChunkDiff | None] = _no_diff


@dataclass
class CorpusLoader:
    """Parser, contract and chunker over one corpus, through ``cache`` (``None``: no cache).

    ``configs`` are the resolved stage configs that key the entries (``parser``, ``contract``,
    ``chunker``): the policies that change the documents (``on_empty``, ``on_error``, the contract)
    key their own entry, so a ``skip`` run's documents never let a ``fail`` run pass."""

    parser: Parser
    chunker: Chunker
    contract: Contract | None = None
    on_parse_error: str = "fail"
    cache: StageCache | None = None
    configs: Mapping[str, Any] = field(default_factory=dict)
    # what the last load computed rather than read back (COUNTS): files parsed and the
    # documents they held, documents the contract completed, chunks it tagged
    counts: Counter[str] = field(default_factory=Counter, init=False)
    # per records file parsed whole by the last load: its lines' digests and documents
    _records: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict, init=False)

    def lineage_key(self, root: Path, on_empty: str) -> str:
        """The note of the corpus under ``root`` as this loader reads and chunks it."""
        parser_key, chunker_key = self._configs(on_empty)
        return keys.lineage_key(parser_key, chunker_key, str(Path(root).resolve()))

    def keys(self, corpus_fingerprint: str, on_empty: str) -> tuple[str, str]:
        """``(documents key, chunks key)`` of a corpus with this fingerprint."""
        parser_key, chunker_key = self._configs(on_empty)
        docs_key = keys.documents_key(parser_key, corpus_fingerprint)
        return docs_key, keys.chunks_key(chunker_key, docs_key)

    def _configs(self, on_empty: str) -> tuple[Any, Any]:
        """What keys the documents (parser and policies) and the chunks (chunker) beyond their
        inputs."""
        parser_key: Any = self.configs.get("parser")
        policy: dict[str, Any] = {"on_empty": on_empty} if on_empty != "skip" else {}
        if self.on_parse_error != "fail":
            policy["on_error"] = self.on_parse_error
        if self.contract is not None:
            policy["contract"] = self.configs.get("contract")
        if policy:
            parser_key = {"parser": parser_key, **policy}
        chunker_key: Any = self.configs.get("chunker")
        if isinstance(self.chunker, Identified):  # an adapter's package versions key its chunks
            chunker_key = {"chunker": chunker_key, "identity": self.chunker.identity}
        if isinstance(self.contract, ChunkTagging):  # chunks tagged from their own text
            chunker_key = {"chunker": chunker_key, "tags": "chunk_text"}
        return parser_key, chunker_key

    def load(
        self,
        sources: Sequence[Path],
        root: Path,
        corpus_fingerprint: str,
        on_empty: str = "skip",
        left_out: Sequence[tuple[str, str]] = (),
    ) -> LoadedCorpus:
        """Parse, check and chunk ``sources`` (files under ``root``); each step read back from
        the cache when its key hits. ``on_empty``: documents with empty text are skipped
        (counted in the warnings) or refused (``fail``). ``left_out``: the corpus folder's
        entries its listing did not read (``(path, reason)``), counted in the ingest report
        (the corpus fingerprint must cover them)."""
        t0 = time.perf_counter()
        self.counts = Counter({k: 0 for k in COUNTS})
        docs_key, chunks_key = self.keys(corpus_fingerprint, on_empty)
        built: dict[str, Any] = {}
        cache = self.cache
        note_key = self.lineage_key(root, on_empty) if cache is not None else ""

        self._records = {}

        def chunk() -> tuple[tuple[Chunk, ...], Mapping[str, Any]]:
            if cache is not None and not left_out:
                built["prior"] = Lineage.read(cache, note_key)
                counted = Counter(self.counts)
                spliced = self._splice(sources, root, built["prior"], docs_key, built)
                if spliced is None:  # the whole read counts what it computes itself
                    self.counts = counted
                else:  # an edit of a few records: only those read again
                    kept, report, built["chunk_digests"], built["records"] = spliced
                    built.update(parse=time.perf_counter() - t0, chunk=0.0, ingest=report)
                    return kept, report
            docs, ingest, warnings = self._documents(
                sources, root, docs_key, on_empty, left_out, built, note_key
            )
            if self._records and len(self._records) == len(sources):
                built["records"] = dict(self._records)
            t1 = time.perf_counter()
            chunks = tuple(self.chunker.chunk(docs))
            if isinstance(self.contract, ChunkTagging):  # entity tags of the chunk's own text
                chunks = self._tag(self.contract, chunks)
            built.update(
                warnings=warnings, parse=t1 - t0, chunk=time.perf_counter() - t1, ingest=ingest
            )
            return chunks, ingest

        def store(value: tuple[tuple[Chunk, ...], Mapping[str, Any]]) -> None:
            if not value[0] or cache is None:  # no chunks: refused below, nothing stored
                return
            if "prior" not in built:
                built["prior"] = Lineage.read(cache, note_key)
            prior = built["prior"]
            digests = built["digests"] = built.get("chunk_digests") or _chunk_digests(
                value[0], built.get("documents")
            )
            entry, depth = _chunks_entry(cache, value, digests, prior, chunks_key)
            cache.put_json("chunks", chunks_key, entry)
            docs = built.get("documents")  # (key, digests, depth) of a documents entry written
            if docs is None and prior is not None and prior.documents_key == docs_key:
                docs = (prior.documents_key, prior.doc_digests, prior.docs_depth)
            docs = docs or ("", {}, 0)
            records = built.get("records") or {}
            note = Lineage(chunks_key, digests, depth, docs[0], docs[1], docs[2], records)
            note.write(cache, note_key)

        chunks, ingest = memo(
            cache,
            "chunks",
            chunks_key,
            chunk,
            # decoded once per process: a multirun's jobs with one chunker share the chunk objects
            read=lambda: (
                cache.get_decoded("chunks", chunks_key, chunk_entry_in(cache)) if cache else None
            ),
            write=store,
        )
        seconds = {
            "parse": built.get("parse", 0.0),
            "chunk": built.get("chunk", time.perf_counter() - t0),
        }
        diff = _differ(cache, note_key, chunks, chunks_key, built) if cache is not None else None
        return LoadedCorpus(
            chunks,
            chunks_key if self.cache else "",
            ingest,
            built.get("warnings", ()),
            seconds,
            diff or _no_diff,
        )

    def _splice(
        self,
        sources: Sequence[Path],
        root: Path,
        prior: Lineage | None,
        docs_key: str,
        built: dict[str, Any],
    ) -> tuple[tuple[Chunk, ...], dict[str, Any], dict[str, str], dict[str, Any]] | None:
        """An edit of a few records in records files (JSON lines), worked out from the chunk set
        the corpus' note names (``prior``): each line whose digest the note holds keeps its
        document's chunks and ingest row; only the other lines are parsed (``RecordLines``),
        completed, chunked and tagged. Returns the chunks, the ingest report, a digest per chunk
        and the files' line records for the note, and writes the documents entry ``docs_key``
        as its edit of the note's (``built["documents"]``); ``None`` (the whole read runs instead)
        unless every file is a records file the note describes, the corpus had no warnings
        (empty documents, refused or unread files, contract problems), the chunker chunks one
        document at a time (``PerDocument``), the contract (if any) can say that nothing it
        checks across documents involves the new ones (``Separable``), and the new records
        are well-formed, non-empty and give no problems or repeated ids."""
        cache = self.cache
        contract = self.contract
        if cache is None or prior is None or not prior.records:
            return None
        if [str(p) for p in sources] != list(prior.records):
            return None
        if not (isinstance(self.chunker, PerDocument) and self.chunker.per_document):
            return None
        if contract is not None and not (
            isinstance(contract, DocumentWise) and isinstance(contract, Separable)
        ):
            return None
        parsers: list[RecordLines] = []
        for path in sources:
            own = getattr(self.parser, "parsers", {}).get(path.suffix.lower(), self.parser)
            if path.suffix.lower() not in self.parser.suffixes or not isinstance(own, RecordLines):
                return None
            if isinstance(self.parser, Selective) and self.parser.unread(path):
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
            checked = self._check(contract, new_docs, where, parsed_digests)
            if checked.problems or not all(contract.standalone(d) for d in checked.documents):
                return None
            completed = list(checked.documents)
        new_chunks = tuple(self.chunker.chunk(completed))
        if isinstance(contract, ChunkTagging) and new_chunks:
            new_chunks = self._tag(contract, new_chunks)
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
        self.counts["parsed_files"] += len(parsed_files)
        self.counts["parsed_documents"] += len(new_docs)
        ingest = {**held_ingest, "totals": totals, "documents": doc_rows}
        self._documents_edit(prior, docs_key, order, completed, parsed_digests, ingest, built)
        return tuple(chunks), ingest, digests_out, records

    def _documents_edit(
        self,
        prior: Lineage,
        docs_key: str,
        order: Sequence[tuple[str, Document | None]],
        completed: Sequence[Document],
        parsed_digests: dict[str, str],
        ingest: Mapping[str, Any],
        built: dict[str, Any],
    ) -> None:
        """Write the documents entry ``docs_key`` of a spliced read as its edit of the one the
        note names (``completed``: the new documents; ``order``: every document) and record it
        for the note (``built["documents"]``); nothing when that entry is gone or too deep."""
        cache = self.cache
        if (
            cache is None
            or not prior.documents_key
            or prior.docs_depth >= MAX_DELTA_CHAIN
            or not all(i in prior.doc_digests for i, d in order if d is None)
            or not cache.path("documents", prior.documents_key, "json.gz").is_file()
        ):
            return
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
        built["documents"] = (docs_key, digests, prior.docs_depth + 1)

    def _documents(
        self,
        sources: Sequence[Path],
        root: Path,
        key: str,
        on_empty: str,
        left_out: Sequence[tuple[str, str]] = (),
        built: dict[str, Any] | None = None,
        note_key: str = "",
    ) -> tuple[list[Document], Mapping[str, Any], tuple[str, ...]]:
        """The checked documents, the ingest report and the warnings (``documents`` entry).
        ``built`` (with the corpus' note under ``note_key``): where an edit writes the entry as
        its edit of the corpus' previous documents entry and records it for the note."""
        built = {} if built is None else built
        digests: dict[str, str] = {}
        # the entry's form of each completed document read from its row (by object): not
        # converted back again
        spelled: dict[int, dict[str, Any]] = {}

        def parse() -> dict[str, Any]:
            corpus = read_corpus(
                self.parser,
                sources,
                root,
                on_empty,
                self.on_parse_error,
                self._parse_file(root),
                left_out,
            )
            docs, warnings = list(corpus.documents), list(corpus.warnings)
            problems: tuple[Any, ...] = ()
            if self.contract is not None:
                where = {d.doc_id: w for f in corpus.files for w, d in f.documents}
                checked = self._check(self.contract, docs, where, digests, spelled)
                docs, problems = list(checked.documents), checked.problems
                if problems:
                    warnings.append(
                        f"n_contract_problems={len(problems)}: documents that break the metadata "
                        f"contract (first: {problems[0]}; all in ingest_report.json; "
                        "contract.mode=strict refuses them)"
                    )
            for w in warnings:
                log.warning(w)
            built["checked"] = docs  # what the entry's documents decode to, as objects already
            return {
                "documents": [spelled.get(id(d)) or document_to_dict(d) for d in docs],
                "warnings": warnings,
                "ingest": ingest_report(corpus, docs, problems),
            }

        cache = self.cache

        def store(entry: dict[str, Any]) -> None:
            assert cache is not None
            if "prior" not in built and note_key:
                built["prior"] = Lineage.read(cache, note_key)
            value, depth = _documents_entry(cache, entry, digests, built.get("prior"), key)
            cache.put_json("documents", key, value)
            if digests:
                built["documents"] = (key, digests, depth)

        entry = memo(
            cache,
            "documents",
            key,
            parse,
            read=lambda: _read_documents(cache, key) if cache else None,
            write=store,
        )
        checked = built.pop("checked", None)  # computed here: not decoded from the entry again
        return (
            list(checked)
            if checked is not None
            else [document_from_dict(d) for d in entry["documents"]],
            dict(entry.get("ingest") or {}),
            tuple(entry.get("warnings", ())),
        )

    def _check(
        self,
        contract: Contract,
        docs: Sequence[Document],
        where: Mapping[str, str],
        digests_out: dict[str, str] | None = None,
        spelled: dict[int, dict[str, Any]] | None = None,
    ) -> Checked:
        """``contract.check``; for a ``DocumentWise`` contract each document's completion is read
        from its row of a per-document table (the contract's config and the document's content)
        when an earlier read stored it: an edit completes the documents it changed. ``spelled``
        receives each completed document's ``document_to_dict`` form, by object id."""
        spelled = {} if spelled is None else spelled
        cache = self.cache
        if cache is None or not isinstance(contract, DocumentWise):
            self.counts["checked_documents"] += len(docs)
            return contract.check(docs, where)
        table = keys.model_table({"contract": self.configs.get("contract"), "rag_lab": __version__})
        digests = [document_digest(d) for d in docs]
        if digests_out is not None:  # what the documents entry and the corpus' note record
            digests_out.update((d.doc_id, h) for d, h in zip(docs, digests))
        found = cache.get_many("documents", table, digests, counted=False)
        done: list[tuple[Document, Sequence[Problem]]] = []
        fresh: dict[str, bytes] = {}
        for doc, digest in zip(docs, digests):
            src = where.get(doc.doc_id, doc.doc_id)
            raw = found.get(digest)
            if raw is not None:
                row = orjson.loads(raw)
                own = [Problem(doc.doc_id, src, f, m) for f, m in row["problems"]]
                done.append((document_from_dict(row["doc"]), own))
                spelled[id(done[-1][0])] = row["doc"]
                continue
            completed, own = contract.complete(doc, src)
            done.append((completed, own))
            spelled[id(completed)] = document_to_dict(completed)
            value = {
                "doc": spelled[id(completed)],
                "problems": [[p.field, p.message] for p in own],
            }
            fresh[digest] = orjson.dumps(value, default=str)
        self.counts["checked_documents"] += len(fresh)
        if fresh:
            cache.put_many("documents", table, fresh)
        return contract.finish(done, where)

    def _tag(self, contract: ChunkTagging, chunks: Sequence[Chunk]) -> tuple[Chunk, ...]:
        """``contract.tag_chunks``, each chunk's tags read from its row of a per-chunk table (the
        contract's config, the chunk's section, text and tags) when an earlier read stored it."""
        cache = self.cache
        if cache is None:
            self.counts["tagged_chunks"] += len(chunks)
            return tuple(contract.tag_chunks(chunks))
        table = keys.model_table({"tags": self.configs.get("contract"), "rag_lab": __version__})
        digests = [
            hashlib.blake2b(
                orjson.dumps([c.section, c.text, c.metadata.get("entity_tags")], default=list),
                digest_size=16,
            ).hexdigest()
            for c in chunks
        ]
        found = cache.get_many("chunks", table, digests, counted=False)
        todo = [i for i, d in enumerate(digests) if d not in found]
        tagged = dict(zip(todo, contract.tag_chunks([chunks[i] for i in todo])))
        self.counts["tagged_chunks"] += len(todo)
        if todo:
            fresh = {
                digests[i]: orjson.dumps(list(c.metadata.get("entity_tags") or []))
                for i, c in tagged.items()
            }
            cache.put_many("chunks", table, fresh)
        out = []
        for i, c in enumerate(chunks):
            if i in tagged:
                out.append(tagged[i])
            else:
                tags = orjson.loads(found[digests[i]])
                if c.metadata.get("entity_tags") == tags:  # the chunk's text adds none (most)
                    out.append(c)
                else:
                    out.append(replace(c, metadata={**c.metadata, "entity_tags": tags}))
        return tuple(out)

    def _parse_file(self, root: Path) -> Callable[[Path], ParsedFile]:
        """``parse_file`` through the per-file cache entry (parser config + the file's name and
        bytes): a chunker or contract sweep, or an edit of one file, never re-parses (or re-OCRs)
        the others. A ``Plain`` parser's records files are parsed each time instead (as fast as
        reading an entry; an edited record would rewrite the whole file's). An auto parser's
        file is keyed on its suffix's parser alone: changing the HTML options keeps every PDF's
        OCR."""
        cache, parser_cfg = self.cache, self.configs.get("parser")
        by_suffix = {}
        if isinstance(parser_cfg, dict) and isinstance(parser_cfg.get("parsers"), dict):
            by_suffix = {f".{k.lower().lstrip('.')}": v for k, v in parser_cfg["parsers"].items()}

        def parse(path: Path) -> ParsedFile:
            own = getattr(self.parser, "parsers", {}).get(path.suffix.lower(), self.parser)
            if cache is None or (isinstance(own, Plain) and own.plain):
                parsed = parse_file(self.parser, path, root)
                self.counts["parsed_files"] += 1
                self.counts["parsed_documents"] += len(parsed.documents)
                lines = _line_records(path, parsed) if isinstance(own, RecordLines) else None
                if cache is not None and lines is not None:
                    self._records[str(path)] = lines
                return parsed
            config = by_suffix.get(path.suffix.lower(), parser_cfg)
            key = keys.parsed_file_key(config, fingerprint_files([path], root=root))
            fresh: list[ParsedFile] = []

            def compute() -> dict[str, Any]:
                parsed = parse_file(self.parser, path, root)
                fresh.append(parsed)
                return {
                    "documents": [[w, document_to_dict(d)] for w, d in parsed.documents],
                    "seconds": parsed.seconds,
                }

            raw = cache.memo(
                "parsed_files", key, compute, read=lambda: _entry(cache, "parsed_files", key)
            )
            if fresh:
                self.counts["parsed_files"] += 1
                self.counts["parsed_documents"] += len(fresh[0].documents)
                return fresh[0]
            docs = tuple((w, document_from_dict(d)) for w, d in raw["documents"])
            return ParsedFile(str(path), docs, float(raw["seconds"]))

        return parse
