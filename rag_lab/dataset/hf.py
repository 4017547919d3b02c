"""BEIR-style sets through Hugging Face ``datasets``: a hub id (``mteb/scifact``) or local files.

A set comes in three parts, each one HF dataset: the corpus, the queries and the qrels. The
defaults are the mteb layout on the hub: configs ``corpus`` (split ``corpus``: ``_id``, ``title``,
``text``), ``queries`` (split ``queries``: ``_id``, ``text``) and ``default`` (one split per
qrels split: ``query-id``, ``corpus-id``, ``score``). Every part's config, split, location and
column names can be changed (``dataset.corpus.text=abstract``).

Where a part is read from (its ``path``, else the dataset's ``path``; a relative part path is
taken inside a local dataset folder):

- a file: ``.parquet``, ``.arrow``, ``.jsonl`` / ``.json``, ``.csv`` (one table; ``split`` ignored);
- a folder written by ``save_to_disk``: a ``Dataset``, or a ``DatasetDict`` from which ``split``
  is taken;
- a folder holding ``<config>/`` as a ``save_to_disk`` folder, or a ``<config>.<suffix>`` file:
  that one;
- any other local folder, or a hub id: ``datasets.load_dataset(path, config, split=split)``
  (a local copy of a hub repository, such as mteb's parquet layout, reads the config table of
  its ``README.md``; a hub id needs a network or the HF cache).

A column named in the mapping that a part lacks is a one-line ``ConfigError`` naming the part's
source and the key; bad values (duplicate ids, a non-numeric score) a ``DataError``.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag_lab.dataset._records import check_on_empty, labelled_split
from rag_lab.dataset.base import LabelledQueries
from rag_lab.errors import ConfigError, DataError
from rag_lab.types import Query

SUFFIX_BUILDERS = {
    ".parquet": "parquet",
    ".arrow": "arrow",
    ".jsonl": "json",
    ".json": "json",
    ".csv": "csv",
}

# the mteb layout (``mteb/scifact`` and the other BEIR sets mteb hosts); ``split: null`` in the
# qrels part means the dataset's own ``split``
DEFAULTS: dict[str, dict[str, Any]] = {
    "corpus": {"path": None, "config": "corpus", "split": "corpus", "id": "_id", "title": "title",
               "text": "text"},
    "queries": {"path": None, "config": "queries", "split": "queries", "id": "_id",
                "text": "text", "metadata": None},
    "qrels": {"path": None, "config": "default", "split": None, "query_id": "query-id",
              "corpus_id": "corpus-id", "score": "score"},
}  # fmt: skip


def _hf() -> Any:
    """HF ``datasets``, imported on first use (by name: the repository's own ``datasets/`` folder
    of data would shadow it for mypy)."""
    module = importlib.import_module("datasets")
    module.disable_progress_bars()
    return module


def _spec(part: str, given: Mapping[str, Any] | None) -> dict[str, Any]:
    spec = dict(DEFAULTS[part])
    unknown = sorted(set(given or {}) - set(spec))
    if unknown:
        raise ConfigError(
            f"dataset.{part}.{unknown[0]}: unknown key (keys: {', '.join(DEFAULTS[part])})"
        )
    spec.update(given or {})
    return spec


class HfDataset:
    """Args:
    path: a hub id (``mteb/scifact``) or a local folder / file; each part may name its own.
    split: the qrels split (``test``, ``dev``, ``train``).
    corpus, queries, qrels: per part ``path``, ``config``, ``split`` and column names (see
        ``DEFAULTS``; given keys override them).
    revision: hub revision (branch, tag or commit) for hub ids.
    name: label in logs and MLflow (default: the last component of ``path``).
    materialise_dir: where the corpus is written as ``corpus.jsonl`` for the parser (default
        ``<experiments>/datasets``; ``rag_lab.dataset._records``).
    on_empty: ``skip`` or ``fail`` documents with empty text (as ``dataset=beir``).
    """

    def __init__(
        self,
        path: str,
        split: str = "test",
        corpus: Mapping[str, Any] | None = None,
        queries: Mapping[str, Any] | None = None,
        qrels: Mapping[str, Any] | None = None,
        revision: str | None = None,
        name: str | None = None,
        materialise_dir: str | None = None,
        on_empty: str = "skip",
    ) -> None:
        self.path = str(path)
        self.split = split
        self.parts = {
            "corpus": _spec("corpus", corpus),
            "queries": _spec("queries", queries),
            "qrels": _spec("qrels", qrels),
        }
        if self.parts["qrels"]["split"] is None:
            self.parts["qrels"]["split"] = split
        self.revision = revision
        self.name = name or Path(self.path.rstrip("/")).name or self.path
        self.materialise_dir = materialise_dir
        self.on_empty = check_on_empty(on_empty)

    # -- reading one part ------------------------------------------------------------------------
    def _location(self, spec: Mapping[str, Any]) -> tuple[str, Path | None]:
        """The part's location and, when it is on this machine, its local path."""
        where = str(spec["path"] or self.path)
        local = Path(where).expanduser()
        base = Path(self.path).expanduser()
        if spec["path"] and not local.is_absolute() and base.is_dir():
            local = base / local
        return where, (local if local.exists() else None)

    def _read(self, part: str) -> tuple[Any, str]:
        """``(datasets.Dataset, where)`` of ``part``; ``where`` names it in messages."""
        datasets = _hf()
        spec = self.parts[part]
        config, split = spec["config"], spec["split"]
        where, local = self._location(spec)
        try:
            if local is not None:
                return self._read_local(local, config, split)
            ds = datasets.load_dataset(where, config, split=split, revision=self.revision)
            return ds, f"{where} (hub; config {config!r}, split {split!r})"
        except (DataError, ConfigError):
            raise
        except Exception as exc:  # the hub, a broken file, an unknown config or split
            first = (str(exc).splitlines() or [""])[0][:300]
            raise DataError(
                f"dataset.{part}: cannot read {where} (config {config!r}, split {split!r}): "
                f"{type(exc).__name__}: {first}"
            ) from None

    def _read_local(self, path: Path, config: str, split: str) -> tuple[Any, str]:
        datasets = _hf()

        if path.is_file():
            builder = SUFFIX_BUILDERS.get(path.suffix.lower())
            if builder is None:
                raise DataError(f"{path}: unsupported file type (use {', '.join(SUFFIX_BUILDERS)})")
            return datasets.load_dataset(builder, data_files=str(path), split="train"), str(path)
        if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
            loaded = datasets.load_from_disk(str(path))
            if isinstance(loaded, datasets.DatasetDict):
                if split not in loaded:
                    raise DataError(
                        f"{path}: no split {split!r} (splits: {', '.join(loaded) or 'none'})"
                    )
                return loaded[split], f"{path} (split {split!r})"
            return loaded, str(path)
        saved = path / config
        if (saved / "dataset_dict.json").is_file() or (saved / "state.json").is_file():
            return self._read_local(saved, config, split)
        for candidate in (path / f"{config}{s}" for s in SUFFIX_BUILDERS):
            if candidate.is_file():
                return self._read_local(candidate, config, split)
        ds = datasets.load_dataset(str(path), config, split=split)
        return ds, f"{path} (config {config!r}, split {split!r})"

    def _columns(self, part: str, keys: tuple[str, ...]) -> tuple[dict[str, list[Any]], str]:
        """The part's columns named by ``keys`` of its spec (``None``: not read)."""
        ds, where = self._read(part)
        spec = self.parts[part]
        have = list(ds.column_names)
        for key in keys:
            column = spec[key]
            if column is not None and column not in have:
                raise ConfigError(
                    f"dataset.{part}.{key}={column!r}: no such column in {where} "
                    f"(columns: {', '.join(have)})"
                )
        wanted = [spec[k] for k in keys if spec[k] is not None]
        table = ds.select_columns(list(dict.fromkeys(wanted))).to_dict()
        n = len(ds)
        return {k: (table[spec[k]] if spec[k] is not None else [None] * n) for k in keys}, where

    # -- the split -------------------------------------------------------------------------------
    def _corpus(self) -> list[dict[str, Any]]:
        cols, where = self._columns("corpus", ("id", "title", "text"))
        records: list[dict[str, Any]] = []
        first: dict[str, int] = {}
        for row, (did, title, text) in enumerate(zip(cols["id"], cols["title"], cols["text"])):
            if did is None or not str(did).strip():
                raise DataError(f"{where}: row {row}: empty corpus id")
            did = str(did)
            if did in first:
                raise DataError(
                    f"{where}: row {row}: duplicate corpus id {did!r} (first at row {first[did]})"
                )
            first[did] = row
            records.append({"_id": did, "title": "" if title is None else str(title),
                            "text": "" if text is None else str(text)})  # fmt: skip
        return records

    def _queries(self) -> dict[str, Query]:
        cols, where = self._columns("queries", ("id", "text", "metadata"))
        out: dict[str, Query] = {}
        first: dict[str, int] = {}
        for row, (qid, text, meta) in enumerate(zip(cols["id"], cols["text"], cols["metadata"])):
            if qid is None or text is None:
                raise DataError(
                    f"{where}: row {row}: empty query {'id' if qid is None else 'text'}"
                )
            qid = str(qid)
            if qid in first:
                raise DataError(
                    f"{where}: row {row}: duplicate query id {qid!r} (first at row {first[qid]})"
                )
            if meta is not None and not isinstance(meta, dict):
                raise DataError(f"{where}: row {row}: query metadata must be a mapping")
            first[qid] = row
            out[qid] = Query(qid, str(text), meta or {})
        return out

    def _qrels(self) -> dict[str, dict[str, int | float]]:
        cols, where = self._columns("qrels", ("query_id", "corpus_id", "score"))
        qrels: dict[str, dict[str, int | float]] = {}
        rows = zip(cols["query_id"], cols["corpus_id"], cols["score"])
        for row, (qid, did, score) in enumerate(rows):
            try:
                value = float(score)
            except (TypeError, ValueError):
                value = math.nan
            if not math.isfinite(value):
                raise DataError(f"{where}: row {row}: score {score!r} is not a finite number")
            grades = qrels.setdefault(str(qid), {})
            if str(did) in grades:
                raise DataError(
                    f"{where}: row {row}: duplicate judgment for query {qid!r}, document {did!r}"
                )
            grades[str(did)] = int(value) if value.is_integer() else value
        return qrels

    def load(self) -> LabelledQueries:
        return labelled_split(
            name=self.name,
            split=self.split,
            corpus=self._corpus(),
            queries=self._queries(),
            qrels=self._qrels(),
            materialise_dir=self.materialise_dir,
            on_empty=self.on_empty,
            where=f"{self.path} (qrels split {self.parts['qrels']['split']!r})",
        )
