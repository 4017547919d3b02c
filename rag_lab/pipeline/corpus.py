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

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_lab.cache import StageCache, keys, memo
from rag_lab.chunker.base import Chunker
from rag_lab.contract.base import ChunkTagging, Contract
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
from rag_lab.pipeline.contract_rows import ContractRows
from rag_lab.pipeline.corpus_entries import (
    chunk_entry_in,
    chunks_entry,
    documents_entry,
    json_entry,
    read_documents,
)
from rag_lab.pipeline.edits import ChunkDiff, Lineage, chunk_digest
from rag_lab.pipeline.ingest import ingest_report
from rag_lab.pipeline.splice import line_records, splice
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


# the corpus read's counters (CorpusLoader.counts; metrics.json: cache/corpus/n_<name>)
COUNTS = ("parsed_files", "parsed_documents", "checked_documents", "tagged_chunks")


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
                prior, rows = built["prior"], self._rows()
                spliced = splice(
                    sources, root, prior, docs_key, self.parser, self.chunker, self.contract, rows
                )
                if spliced is None:  # the whole read counts what it computes itself
                    self.counts = counted
                else:  # an edit of a few records: only those read again
                    if spliced.documents is not None:
                        built["documents"] = spliced.documents
                    built.update(chunk_digests=spliced.digests, records=spliced.records)
                    built.update(parse=time.perf_counter() - t0, chunk=0.0, ingest=spliced.ingest)
                    return spliced.chunks, spliced.ingest
            docs, ingest, warnings = self._documents(
                sources, root, docs_key, on_empty, left_out, built, note_key
            )
            if self._records and len(self._records) == len(sources):
                built["records"] = dict(self._records)
            t1 = time.perf_counter()
            chunks = tuple(self.chunker.chunk(docs))
            if isinstance(self.contract, ChunkTagging):  # entity tags of the chunk's own text
                chunks = self._rows().tag(self.contract, chunks)
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
            entry, depth = chunks_entry(cache, value, digests, prior, chunks_key)
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

    def _rows(self) -> ContractRows:
        """The contract's row tables, counting into this load's ``counts``."""
        return ContractRows(self.cache, self.configs.get("contract"), self.counts)

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
                checked = self._rows().check(self.contract, docs, where, digests, spelled)
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
            value, depth = documents_entry(cache, entry, digests, built.get("prior"), key)
            cache.put_json("documents", key, value)
            if digests:
                built["documents"] = (key, digests, depth)

        entry = memo(
            cache,
            "documents",
            key,
            parse,
            read=lambda: read_documents(cache, key) if cache else None,
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
                lines = line_records(path, parsed) if isinstance(own, RecordLines) else None
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
                "parsed_files", key, compute, read=lambda: json_entry(cache, "parsed_files", key)
            )
            if fresh:
                self.counts["parsed_files"] += 1
                self.counts["parsed_documents"] += len(fresh[0].documents)
                return fresh[0]
            docs = tuple((w, document_from_dict(d)) for w, d in raw["documents"])
            return ParsedFile(str(path), docs, float(raw["seconds"]))

        return parse
