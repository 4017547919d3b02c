"""SQuAD-format QA files as a retrieval set (SQuAD v1.1 / v2.0 and the sets that ship in its
shape: CMRC 2018, DRCD, XQuAD, MLQA, ...).

``{"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question", "answers":
[{"text", "answer_start"}], "is_impossible"?}]}]}]}`` becomes:

- corpus: the unique contexts, id = the first 16 hex of the SHA-256 of the context text (so the
  same paragraph in two files, or in two articles, is one document); title = its article's title;
- queries: the questions, with the gold answer strings as ``metadata.answers`` (evidence-level
  metrics) and the article title as ``metadata.category`` when ``title_as_category``;
- qrels: each question's own context, grade 1. A v2 unanswerable question
  (``is_impossible: true``) keeps its context as a grade-0 near miss: it is unanswerable (noise
  ratio only, README "Metric definitions"), its ``plausible_answers`` kept as metadata.

A malformed file is a one-line ``DataError`` naming the file and the JSON path of the bad entry.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from rag_lab.dataset._records import check_on_empty, labelled_split
from rag_lab.dataset.base import LabelledQueries
from rag_lab.errors import DataError
from rag_lab.io.files import read_text
from rag_lab.types import Query


def context_id(text: str) -> str:
    """A context's document id: first 16 hex of SHA-256 of its text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def looks_like_squad(path: Path) -> bool:
    """Whether ``path`` (a ``.json`` file) opens like a SQuAD file: ``{"version"..., "data": [{...
    "paragraphs"``; only its first 64 KiB are read."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16).decode("utf-8", "ignore")
    except OSError:
        return False
    return head.lstrip().startswith("{") and '"data"' in head and '"paragraphs"' in head


def _get(node: Any, key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(node, dict) or key not in node:
        raise DataError(f"{where}: missing key {key!r}")
    value = node[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DataError(f"{where}.{key}: expected {names}, got {type(value).__name__}")
    return value


class SquadDataset:
    """Args:
    path: a SQuAD-format ``.json`` file, or a folder of them.
    split: a label; in a folder it also selects the files whose name contains it
        (``dev`` → ``dev-v2.0.json``, ``cmrc2018_dev.json``).
    name: label in logs and MLflow (default: the file stem or folder name).
    title_as_category: the article title becomes each query's ``metadata.category``
        (per-category means in metrics.json; off by default: SQuAD has hundreds of articles).
    materialise_dir: where the corpus is written as ``corpus.jsonl`` for the parser.
    on_empty: ``skip`` or ``fail`` documents with empty text.
    """

    def __init__(
        self,
        path: str,
        split: str = "dev",
        name: str | None = None,
        title_as_category: bool = False,
        materialise_dir: str | None = None,
        on_empty: str = "skip",
    ) -> None:
        self.path = Path(path).expanduser()
        self.split = split
        self.name = name or (self.path.stem if self.path.is_file() else self.path.resolve().name)
        self.title_as_category = bool(title_as_category)
        self.materialise_dir = materialise_dir
        self.on_empty = check_on_empty(on_empty)

    def files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path]
        if not self.path.is_dir():
            raise DataError(f"SQuAD file or folder not found: {self.path}")
        found = sorted(self.path.glob("*.json"))
        chosen = [p for p in found if self.split in p.name]
        if not chosen:
            raise DataError(
                f"{self.path}: no .json file with {self.split!r} in its name "
                f"(files: {', '.join(p.name for p in found) or 'none'}; set dataset.split)"
            )
        return chosen

    def load(self) -> LabelledQueries:
        corpus: dict[str, dict[str, Any]] = {}
        queries: dict[str, Query] = {}
        qrels: dict[str, dict[str, int | float]] = {}
        first: dict[str, str] = {}
        for path in self.files():
            try:
                root = json.loads(read_text(path))
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{exc.lineno}: malformed JSON ({exc.msg})") from None
            for i, article in enumerate(_get(root, "data", str(path), list)):
                where_a = f"{path}: data[{i}]"
                title = str(article.get("title") or "") if isinstance(article, dict) else ""
                for j, para in enumerate(_get(article, "paragraphs", where_a, list)):
                    where_p = f"{where_a}.paragraphs[{j}]"
                    context = _get(para, "context", where_p, str)
                    did = context_id(context)
                    corpus.setdefault(did, {"_id": did, "title": title, "text": context})
                    for k, qa in enumerate(_get(para, "qas", where_p, list)):
                        where_q = f"{where_p}.qas[{k}]"
                        qid = str(_get(qa, "id", where_q, (str, int)))
                        if qid in first:
                            raise DataError(
                                f"{path}: {where_q.split(': ', 1)[1]}: duplicate question id "
                                f"{qid!r} (first at {first[qid]})"
                            )
                        first[qid] = where_q
                        queries[qid], qrels[qid] = self._question(qa, where_q, did, title)
        return labelled_split(
            name=self.name,
            split=self.split,
            corpus=list(corpus.values()),
            queries=queries,
            qrels=qrels,
            materialise_dir=self.materialise_dir,
            on_empty=self.on_empty,
            where=", ".join(str(p) for p in self.files()),
        )

    def _question(
        self, qa: dict[str, Any], where: str, did: str, title: str
    ) -> tuple[Query, dict[str, int | float]]:
        question = _get(qa, "question", where, str)
        impossible = bool(qa.get("is_impossible", False))

        def texts(key: str) -> list[str]:
            items = qa.get(key) or []
            if not isinstance(items, list):
                raise DataError(f"{where}.{key}: expected a list")
            out = []
            for n, a in enumerate(items):
                text = _get(a, "text", f"{where}.{key}[{n}]", str)
                if text.strip() and text not in out:
                    out.append(text)
            return out

        meta: dict[str, Any] = {}
        answers = [] if impossible else texts("answers")
        if answers:
            meta["answers"] = answers
        if impossible:
            meta["plausible_answers"] = texts("plausible_answers")
        if self.title_as_category and title:
            meta["category"] = title
        grade = 0 if impossible else 1
        return Query(str(qa["id"]), question, meta), {did: grade}
