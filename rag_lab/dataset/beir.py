"""BEIR on-disk layout: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

``corpus`` may also name a folder of raw files (Markdown, text, JSONL records) that the
configured parser reads; that is how the shipped sample dataset keeps its manuals as Markdown.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path

from rag_lab.dataset.base import LabelledQueries
from rag_lab.errors import DataError
from rag_lab.io import fingerprint_files, read_jsonl, require_file, require_key
from rag_lab.types import Qrels, Query

log = logging.getLogger(__name__)


def read_qrels(path: Path) -> Qrels:
    """Read a BEIR qrels TSV (``query-id corpus-id score``; header optional)."""
    qrels: Qrels = {}
    with open(require_file(path, "qrels file"), encoding="utf-8", newline="") as fh:
        for lineno, row in enumerate(csv.reader(fh, delimiter="\t"), 1):
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
            try:
                grade = int(float(score))
            except (ValueError, OverflowError):
                raise DataError(
                    f"{path}:{lineno}: score {score!r} is not a finite number"
                ) from None
            if did in qrels.setdefault(qid, {}):
                raise DataError(
                    f"{path}:{lineno}: duplicate judgment for query {qid!r}, document {did!r}"
                )
            qrels[qid][did] = grade
    if not qrels:
        raise DataError(f"{path}: no judgments")
    return qrels


def read_queries(path: Path) -> dict[str, Query]:
    queries: dict[str, Query] = {}
    for lineno, rec in read_jsonl(require_file(path, "queries file")):
        qid = str(require_key(rec, "_id", path, lineno))
        text = require_key(rec, "text", path, lineno)
        if qid in queries:
            raise DataError(f"{path}:{lineno}: duplicate query id {qid!r}")
        meta = rec.get("metadata") or {}
        if not isinstance(meta, dict):
            raise DataError(f"{path}:{lineno}: 'metadata' must be an object")
        queries[qid] = Query(qid, str(text), meta)
    return queries


class BeirDataset:
    """A BEIR-layout folder.

    Args:
        path: dataset folder.
        split: qrels file stem under ``qrels/`` (``test``, ``dev``, ``train``).
        corpus: corpus file or folder, relative to ``path``.
        name: a label for logs and MLflow (defaults to the folder name).
    """

    def __init__(
        self,
        path: str,
        split: str = "test",
        corpus: str = "corpus.jsonl",
        queries: str = "queries.jsonl",
        name: str | None = None,
    ) -> None:
        self.path = Path(path).expanduser()
        self.split = split
        self.corpus = corpus
        self.queries_file = queries
        self.name = name or self.path.resolve().name

    def corpus_sources(self) -> tuple[Path, tuple[Path, ...]]:
        src = self.path / self.corpus
        if not src.exists():
            raise DataError(f"corpus not found: {src}")
        if src.is_file():
            return src.parent, (src,)
        files = tuple(
            sorted(p for p in src.rglob("*") if p.is_file() and not p.name.startswith("."))
        )
        if not files:
            raise DataError(f"corpus folder is empty: {src}")
        return src, files

    def has_split(self, split: str) -> bool:
        """Whether ``qrels/<split>.tsv`` exists (``rag_lab.dataset.base.SplitAware``)."""
        return (self.path / "qrels" / f"{split}.tsv").is_file()

    def load(self) -> LabelledQueries:
        if not self.path.is_dir():
            raise DataError(f"dataset folder not found: {self.path}")
        qrels_path = self.path / "qrels" / f"{self.split}.tsv"
        if not qrels_path.exists():
            have = sorted(p.stem for p in (self.path / "qrels").glob("*.tsv"))
            raise DataError(
                f"qrels file not found: {qrels_path} "
                f"(splits available: {', '.join(have) or 'none'})"
            )
        root, sources = self.corpus_sources()
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
        fp = fingerprint_files([*sources, queries_path, qrels_path])
        for w in warnings:
            log.warning(w)
        corpus_fp = fingerprint_files(sources, root=root)
        return LabelledQueries(
            self.name, self.split, sources, root, queries, qrels, fp, corpus_fp, tuple(warnings)
        )
