"""BEIR on-disk layout: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

``corpus`` may also name a folder of raw files (Markdown, text, JSONL records) that the
configured parser reads; that is how the shipped sample dataset keeps its manuals as Markdown.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import math
from pathlib import Path
from typing import cast

from rag_lab.cache.fingerprints import fingerprint
from rag_lab.dataset.base import LabelledQueries
from rag_lab.dataset.conversations import resolve_history
from rag_lab.errors import ConfigError, DataError
from rag_lab.io.files import (
    CorpusFolder,
    list_corpus_folder,
    read_jsonl,
    read_lines,
    require_file,
    require_key,
)
from rag_lab.parser.base import ON_EMPTY
from rag_lab.types import Qrels, Query

log = logging.getLogger(__name__)


def _grade(score: str, path: Path, lineno: int) -> int | float:
    """A judgment grade: integral values stay ``int``; fractional ones (0.5, 1.7) are kept as they
    are, as ranx and trec_eval keep them (relevant iff > 0, linear gain in nDCG)."""
    try:
        value = float(score)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise DataError(f"{path}:{lineno}: score {score!r} is not a finite number")
    return int(value) if value.is_integer() else value


def read_qrels(path: Path) -> Qrels:
    """Read a BEIR qrels TSV (``query-id corpus-id score``; header optional; UTF-8, BOM accepted).

    Grades may be fractional (kept, not truncated). Refused with ``file:line``: fewer than three
    columns, an empty id, a score that is not a finite number, a repeated (query, document) pair
    (both lines named)."""
    qrels: dict[str, dict[str, int | float]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for lineno, line in read_lines(require_file(path, "qrels file")):
        try:
            row = next(csv.reader([line], delimiter="\t"), [])
        except csv.Error as exc:
            raise DataError(f"{path}:{lineno}: unreadable TSV line ({exc})") from None
        if not row or not "".join(row).strip():
            continue
        if lineno == 1 and row[0].strip().lower() in ("query-id", "query_id", "qid"):
            continue
        if len(row) < 3:
            raise DataError(
                f"{path}:{lineno}: expected 3 tab-separated columns "
                f"(query-id, corpus-id, score), got {len(row)}"
            )
        qid, did, score = row[0].strip(), row[1].strip(), row[2].strip()
        if not qid or not did:
            raise DataError(f"{path}:{lineno}: empty {'query' if not qid else 'corpus'} id")
        grade = _grade(score, path, lineno)
        if (qid, did) in first_line:
            raise DataError(
                f"{path}:{lineno}: duplicate judgment for query {qid!r}, document {did!r} "
                f"(first at {path}:{first_line[qid, did]})"
            )
        first_line[qid, did] = lineno
        qrels.setdefault(qid, {})[did] = grade
    if not qrels:
        raise DataError(f"{path}: no judgments")
    return cast(Qrels, qrels)  # grades are int | float (types.Qrels still says int)


def read_queries(path: Path) -> dict[str, Query]:
    """Read a BEIR ``queries.jsonl`` (``_id``, ``text``, optional ``metadata`` object); a repeated
    id is refused naming both lines. A conversation's turns get ``metadata.history``
    (``rag_lab.dataset.conversations``)."""
    queries: dict[str, Query] = {}
    first_line: dict[str, int] = {}
    for lineno, rec in read_jsonl(require_file(path, "queries file")):
        qid = str(require_key(rec, "_id", path, lineno))
        text = require_key(rec, "text", path, lineno)
        if qid in queries:
            raise DataError(
                f"{path}:{lineno}: duplicate query id {qid!r} (first at {path}:{first_line[qid]})"
            )
        meta = rec.get("metadata") or {}
        if not isinstance(meta, dict):
            raise DataError(f"{path}:{lineno}: 'metadata' must be an object")
        queries[qid] = Query(qid, str(text), meta)
        first_line[qid] = lineno
    return resolve_history(queries, first_line, path)


class BeirDataset:
    """A BEIR-layout folder.

    Args:
        path: dataset folder.
        split: qrels file stem under ``qrels/`` (``test``, ``dev``, ``train``).
        corpus: corpus file or folder, relative to ``path``.
        name: a label for logs and MLflow (defaults to the folder name).
        on_empty: what parsing does with a document whose text is empty or blank: ``skip`` it
            (counted: ``n_empty_documents`` in the warnings) or ``fail`` naming its file and line.
            Carried on the loaded split (``LabelledQueries.on_empty``) for the corpus read
            (``rag_lab.pipeline.corpus``).
        labels: ``False`` = label-free: every query of the queries file, none labelled, no qrels
            file read (``rag-lab traces to-dataset`` writes such query sets); the run reports
            only what needs no labels (``rag_lab.metrics.score.label_free_metrics``).
    """

    def __init__(
        self,
        path: str,
        split: str = "test",
        corpus: str = "corpus.jsonl",
        queries: str = "queries.jsonl",
        name: str | None = None,
        on_empty: str = "skip",
        labels: bool = True,
    ) -> None:
        if not isinstance(labels, bool):
            raise ConfigError(f"dataset.labels={labels!r}: expected true or false")
        self.labels = labels
        if on_empty not in ON_EMPTY:
            raise ConfigError(f"dataset.on_empty={on_empty!r}: use one of {', '.join(ON_EMPTY)}")
        self.path = Path(path).expanduser()
        self.split = split
        self.corpus = corpus
        self.queries_file = queries
        self.name = name or self.path.resolve().name
        self.on_empty = on_empty

    def corpus_sources(self) -> tuple[Path, CorpusFolder]:
        """The corpus root and its files; a folder is listed by ``list_corpus_folder`` (links
        out of it, dangling links, linked folders and hidden entries left out, with reasons).
        A corpus file named in the config is read wherever a link to it leads."""
        src = self.path / self.corpus
        if not src.exists():
            raise DataError(f"corpus not found: {src}")
        if src.is_file():
            return src.parent, CorpusFolder((src,))
        listing = list_corpus_folder(src)
        if not listing.files:
            first = listing.left_out[0] if listing.left_out else None
            also = (
                f" ({len(listing.left_out)} entries left out; first: {first[0]}: {first[1]})"
                if first
                else ""
            )
            raise DataError(f"corpus folder is empty: {src}{also}")
        return src, listing

    def has_split(self, split: str) -> bool:
        """Whether ``qrels/<split>.tsv`` exists (``rag_lab.dataset.base.SplitAware``)."""
        return (self.path / "qrels" / f"{split}.tsv").is_file()

    def _squad_hint(self) -> None:
        """Refuse a raw SQuAD-format file or folder (no BEIR layout) naming the loader to use."""
        from rag_lab.dataset.squad import looks_like_squad

        files = [self.path] if self.path.is_file() else sorted(self.path.glob("*.json"))
        squad = [p for p in files if p.suffix.lower() == ".json" and looks_like_squad(p)]
        if squad:
            raise DataError(
                f"{self.path} holds SQuAD-format QA ({squad[0].name}), not the BEIR layout: "
                f"use dataset=squad dataset.path={self.path}"
            )

    def load(self) -> LabelledQueries:
        if self.path.is_file():
            self._squad_hint()
        if not self.path.is_dir():
            raise DataError(f"dataset folder not found: {self.path}")
        if not self.labels:
            return self._label_free()
        qrels_path = self.path / "qrels" / f"{self.split}.tsv"
        if not qrels_path.exists():
            self._squad_hint()
            have = sorted(p.stem for p in (self.path / "qrels").glob("*.tsv"))
            raise DataError(
                f"qrels file not found: {qrels_path} "
                f"(splits available: {', '.join(have) or 'none'})"
            )
        root, listing = self.corpus_sources()
        sources = listing.files
        queries_path = self.path / self.queries_file
        all_queries = read_queries(queries_path)
        qrels = read_qrels(qrels_path)
        warnings = []
        missing = [q for q in qrels if q not in all_queries]
        if missing:
            warnings.append(
                f"{len(missing)} queries in {qrels_path.name} are not in "
                f"{queries_path.name} and are skipped (e.g. {missing[:3]})"
            )
        queries = {q: all_queries[q] for q in qrels if q in all_queries}
        qrels = {q: qrels[q] for q in queries}
        if not queries:
            raise DataError(f"no query of {qrels_path} is in {queries_path}")
        n_unanswerable = sum(1 for q in qrels if not any(g > 0 for g in qrels[q].values()))
        if n_unanswerable:
            warnings.append(
                f"{n_unanswerable} queries have no relevant document (unanswerable): "
                "scored for noise ratio only"
            )
        # read back while the files' stat is unchanged (rag_lab.cache.fingerprints)
        fp = fingerprint([*sources, queries_path, qrels_path])
        for w in warnings:
            log.warning(w)
        return self._split(queries, qrels, fp, warnings, listing, sources, root)

    def _label_free(self) -> LabelledQueries:
        """Every query of the queries file, with no judgment (``labels=False``)."""
        root, listing = self.corpus_sources()
        queries_path = self.path / self.queries_file
        queries = read_queries(queries_path)
        if not queries:
            raise DataError(f"{queries_path}: no queries")
        fp = fingerprint([*listing.files, queries_path])
        qrels: Qrels = {q: {} for q in queries}
        return self._split(queries, qrels, fp, [], listing, listing.files, root, labelled=False)

    def _split(
        self,
        queries: dict[str, Query],
        qrels: Qrels,
        fp: str,
        warnings: list[str],
        listing: CorpusFolder,
        sources: tuple[Path, ...],
        root: Path,
        labelled: bool = True,
    ) -> LabelledQueries:
        corpus_fp = fingerprint(sources, root=root)
        left_out = tuple((str(p), why) for p, why in listing.left_out)
        if left_out:  # a link added or removed changes what the ingest report counts
            h = hashlib.blake2b(corpus_fp.encode(), digest_size=16)
            for p, why in listing.left_out:
                h.update(f"\0{p.relative_to(root).as_posix()}\0{why}".encode())
            corpus_fp = h.hexdigest()
        return LabelledQueries(
            self.name,
            self.split,
            sources,
            root,
            queries,
            qrels,
            fp,
            corpus_fp,
            tuple(warnings),
            self.on_empty,
            left_out,
            labelled,
        )
