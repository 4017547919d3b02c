"""What the non-file loaders (``hf``, ``ir_datasets``, ``squad``) share: records in memory become
a ``LabelledQueries`` whose corpus is a BEIR ``corpus.jsonl`` written once into a
content-addressed folder, so the configured parser, the stage cache and exports read it exactly as
they read a BEIR folder.

The folder is ``<materialise_dir>/<name>-<16 hex of the corpus bytes>/corpus.jsonl``: the same
corpus read twice (or by parallel sweep jobs) is written once, a changed one gets its own folder.
The split's ``fingerprint`` hashes what was read (the corpus bytes as written, the split's
queries and qrels in canonical JSON), so the same set read from parquet, arrow or the hub has the
same fingerprint; ``corpus_fingerprint`` is the written file's, as for a BEIR folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from rag_lab.cache.keys import canonical
from rag_lab.dataset.base import LabelledQueries
from rag_lab.errors import ConfigError, DataError
from rag_lab.io.files import fingerprint_files
from rag_lab.parser.base import ON_EMPTY
from rag_lab.paths import experiments_dir
from rag_lab.types import Qrels, Query

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def check_on_empty(on_empty: str) -> str:
    if on_empty not in ON_EMPTY:
        raise ConfigError(f"dataset.on_empty={on_empty!r}: use one of {', '.join(ON_EMPTY)}")
    return on_empty


def materialise_root(materialise_dir: str | None) -> Path:
    """Where corpora are written: ``materialise_dir``, else ``<experiments>/datasets``."""
    return Path(materialise_dir).expanduser() if materialise_dir else experiments_dir() / "datasets"


def corpus_bytes(records: Iterable[Mapping[str, Any]]) -> bytes:
    """BEIR ``corpus.jsonl`` lines (``_id``, ``title``, ``text``[, ``metadata``]), UTF-8."""
    lines = []
    for rec in records:
        out: dict[str, Any] = {
            "_id": rec["_id"],
            "title": rec.get("title") or "",
            "text": rec["text"],
        }
        if rec.get("metadata"):
            out["metadata"] = rec["metadata"]
        lines.append(json.dumps(out, ensure_ascii=False, default=str))
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_corpus(data: bytes, root: Path, name: str) -> Path:
    """``corpus.jsonl`` holding ``data`` under ``root`` (written atomically, once per content)."""
    digest = hashlib.blake2b(data, digest_size=8).hexdigest()
    folder = root / f"{_UNSAFE.sub('_', name).strip('_') or 'dataset'}-{digest}"
    path = folder / "corpus.jsonl"
    if path.is_file() and path.stat().st_size == len(data):
        return path
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".corpus-", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the corpus into {folder} ({exc.strerror or exc}); "
            "set dataset.materialise_dir to a writable folder"
        ) from None
    return path


def labelled_split(
    *,
    name: str,
    split: str,
    corpus: list[dict[str, Any]],
    queries: Mapping[str, Query],
    qrels: Mapping[str, Mapping[str, int | float]],
    materialise_dir: str | None,
    on_empty: str,
    where: str,
    warnings: Iterable[str] = (),
) -> LabelledQueries:
    """The split: the queries judged in ``qrels`` (others dropped; judged ones missing from
    ``queries`` skipped with a warning, as the BEIR loader does), the corpus written to disk.
    ``where`` names the source in messages."""
    notes = list(warnings)
    if not corpus:
        raise DataError(f"{where}: the corpus is empty")
    if not qrels:
        raise DataError(f"{where}: no judgments for split {split!r}")
    missing = [q for q in qrels if q not in queries]
    if missing:
        notes.append(
            f"{len(missing)} judged queries of {where} have no query text and are skipped "
            f"(e.g. {missing[:3]})"
        )
    kept = {q: queries[q] for q in qrels if q in queries}
    if not kept:
        raise DataError(f"{where}: no judged query has a text (split {split!r})")
    labels = {q: dict(qrels[q]) for q in kept}
    n_unanswerable = sum(1 for g in labels.values() if not any(v > 0 for v in g.values()))
    if n_unanswerable:
        notes.append(
            f"{n_unanswerable} queries have no relevant document (unanswerable): "
            "scored for noise ratio only"
        )
    data = corpus_bytes(corpus)
    path = write_corpus(data, materialise_root(materialise_dir), name)
    h = hashlib.blake2b(digest_size=16)
    for part in (
        data,
        canonical(sorted((q.query_id, q.text, dict(q.metadata)) for q in kept.values())),
        canonical(sorted(labels.items())),
    ):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    for w in notes:
        log.warning(w)
    log.info("dataset %s/%s: corpus written to %s", name, split, path)
    return LabelledQueries(
        name,
        split,
        (path,),
        path.parent,
        dict(kept),
        cast(Qrels, labels),
        h.hexdigest(),
        fingerprint_files([path], root=path.parent),
        tuple(notes),
        on_empty,
    )
