"""Labelled sets by ir_datasets id (``beir/scifact/test``, ``beir/nfcorpus/dev``, ...), read from
its local cache (``$IR_DATASETS_HOME``, default ``~/.ir_datasets``).

ir_datasets is an optional extra (``pip install 'rag_lab[ir_datasets]'``). It downloads what a
dataset lacks on first use; offline, the files must already be in its cache. For its BEIR sets
that is the original BEIR zip at ``$IR_DATASETS_HOME/beir/<name>/source.zip`` (a copy of
``https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/<name>.zip``, unpacking to
``<name>/corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``); ir_datasets builds its doc
store beside it.

Documents become ``{_id: doc_id, title, text}`` (ir_datasets' other fields, such as a url, go into
``metadata``); queries take ``text`` (or ``default_text()``); qrels are ``relevance`` grades.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rag_lab.dataset._records import check_on_empty, labelled_split
from rag_lab.dataset.base import LabelledQueries
from rag_lab.errors import ConfigError, DataError
from rag_lab.types import Query

INSTALL = "pip install 'rag_lab[ir_datasets]'"


def _module(home: str | None) -> Any:
    """ir_datasets, imported with ``home`` as its cache (it reads the variable on import)."""
    import sys

    if home:
        want = str(Path(home).expanduser())
        if "ir_datasets" in sys.modules and os.environ.get("IR_DATASETS_HOME") != want:
            raise ConfigError(
                f"dataset.home={home!r}: ir_datasets was already imported with another cache "
                "folder; set IR_DATASETS_HOME before starting instead"
            )
        os.environ["IR_DATASETS_HOME"] = want
    try:
        import ir_datasets
    except ImportError:
        raise ConfigError(f"dataset=ir_datasets needs the ir_datasets package: {INSTALL}") from None
    return ir_datasets


def _text(item: Any) -> str:
    text = getattr(item, "text", None)
    return str(text if text is not None else item.default_text())


class IrDatasetsDataset:
    """Args:
    dataset_id: an ir_datasets id with queries and qrels (``beir/scifact/test``).
    home: its cache folder (default: ``$IR_DATASETS_HOME`` or ``~/.ir_datasets``).
    name: label in logs and MLflow (default: the id with ``/`` as ``-``).
    materialise_dir: where the corpus is written as ``corpus.jsonl`` for the parser.
    on_empty: ``skip`` or ``fail`` documents with empty text.
    """

    def __init__(
        self,
        dataset_id: str,
        home: str | None = None,
        name: str | None = None,
        materialise_dir: str | None = None,
        on_empty: str = "skip",
    ) -> None:
        self.dataset_id = str(dataset_id)
        self.home = home
        self.name = name or self.dataset_id.replace("/", "-")
        self.materialise_dir = materialise_dir
        self.on_empty = check_on_empty(on_empty)

    def load(self) -> LabelledQueries:
        irds = _module(self.home)
        try:
            ds = irds.load(self.dataset_id)
        except KeyError:
            raise ConfigError(
                f"dataset.dataset_id={self.dataset_id!r}: not an ir_datasets id "
                "(e.g. beir/scifact/test; `ir_datasets list` shows them)"
            ) from None
        for what in ("docs", "queries", "qrels"):
            if not getattr(ds, f"has_{what}")():
                raise ConfigError(
                    f"dataset.dataset_id={self.dataset_id!r} has no {what} "
                    "(a labelled split needs docs, queries and qrels: e.g. beir/scifact/test)"
                )
        home = irds.util.home_path()
        try:
            corpus = [self._doc(d) for d in ds.docs_iter()]
            queries = {str(q.query_id): Query(str(q.query_id), _text(q)) for q in ds.queries_iter()}
            qrels: dict[str, dict[str, int | float]] = {}
            for r in ds.qrels_iter():
                qrels.setdefault(str(r.query_id), {})[str(r.doc_id)] = int(r.relevance)
        except Exception as exc:  # a download attempted offline, a truncated cache file
            first = (str(exc).splitlines() or [""])[0][:300]
            raise DataError(
                f"ir_datasets cannot read {self.dataset_id!r} from its cache {home} "
                f"({type(exc).__name__}: {first}); fetch it once with a network "
                f"(`ir_datasets export {self.dataset_id} qrels`) or copy its files there"
            ) from None
        return labelled_split(
            name=self.name,
            split=self.dataset_id.rsplit("/", 1)[-1],
            corpus=corpus,
            queries=queries,
            qrels=qrels,
            materialise_dir=self.materialise_dir,
            on_empty=self.on_empty,
            where=f"ir_datasets {self.dataset_id!r} ({home})",
        )

    @staticmethod
    def _doc(doc: Any) -> dict[str, Any]:
        fields = doc._asdict()
        did = str(fields.pop("doc_id"))
        text = fields.pop("text", None)
        title = fields.pop("title", "") or ""
        meta = {k: v for k, v in fields.items() if v not in (None, "", [], {})}
        return {
            "_id": did,
            "title": str(title),
            "text": str(text if text is not None else doc.default_text()),
            "metadata": meta,
        }
