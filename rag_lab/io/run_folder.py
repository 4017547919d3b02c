"""The files of a run folder, written in one place: what ``rag-lab gate`` and ``rag-lab export``
read back as a side (``metrics.json``, ``per_query.parquet``, ``dataset_fingerprint``), plus the
resolved config of an evaluate run, its document run and the split's judgments as TREC files
(``run.trec``, ``qrels.trec``) and the ingest report (``ingest_report.json``).

``metrics.json`` is strict JSON (RFC 8259): an undefined value (NaN, e.g. noise ratio when nothing
was retrieved, or no encoder throughput) is ``null``, and counts (``rag_lab.metrics.names.
is_count``) are integers. :func:`read_metrics` reads it back with ``null`` as NaN.

Every file is written atomically (:func:`rag_lab.io.atomic.atomic_open`): a full disk leaves the
previous file or none, never a truncated one, and is one error naming the file.
``metrics.json`` is written last of :func:`write_scores`: where it exists, the per-query table
and the fingerprint beside it are complete."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.io.atomic import atomic_open, write_atomic

if TYPE_CHECKING:
    import pandas as pd

METRICS_FILE = "metrics.json"
PER_QUERY_FILE = "per_query.parquet"
FINGERPRINT_FILE = "dataset_fingerprint"
CONFIG_FILE = "config_resolved.yaml"
MLFLOW_RUN_FILE = "mlflow_run_id"
TREC_RUN_FILE = "run.trec"
TREC_QRELS_FILE = "qrels.trec"
INGEST_REPORT_FILE = "ingest_report.json"
ANSWERS_FILE = "answers.jsonl"
REPORT_FILE = "report.html"  # rag_lab.report

# what cannot stand in a TREC column as it is: whitespace of any kind (``\s`` is what str.split()
# splits on, as ranx and ir_measures do), other control characters, and % (the escape itself)
_TREC_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f-\x9f%]")

_INGEST_TEXT: dict[str, str] = {}  # the last ingest report written: compact JSON -> its text


def write_scores(
    out_dir: Path, metrics: Mapping[str, Any], table: pd.DataFrame, fingerprint: str
) -> None:
    """``per_query.parquet``, ``dataset_fingerprint`` and, last, ``metrics.json`` (strict JSON:
    NaN and infinities as ``null``, counts as integers)."""
    text = json.dumps(strict_metrics(metrics), indent=2, sort_keys=True, allow_nan=False)
    with atomic_open(out_dir / PER_QUERY_FILE, "wb") as fh:
        table.to_parquet(fh, index=False)
    write_atomic(out_dir / FINGERPRINT_FILE, fingerprint)
    write_atomic(out_dir / METRICS_FILE, text)


def strict_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """``metrics`` as strict JSON values: a non-finite float → ``None``; a count
    (:func:`rag_lab.metrics.names.is_count`) with an integral value → ``int``; numpy scalars →
    Python numbers; anything else as it is."""
    from rag_lab.metrics.names import is_count

    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if hasattr(value, "item") and not isinstance(value, (str, bytes)):
            value = value.item()  # numpy scalar
        if isinstance(value, float):
            if not math.isfinite(value):
                value = None
            elif is_count(key) and value.is_integer():
                value = int(value)
        out[key] = value
    return out


def read_metrics(path: Path) -> dict[str, Any]:
    """A ``metrics.json`` back, ``null`` read as NaN (older files with bare ``NaN`` read too)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of metrics")
    return {k: math.nan if v is None else v for k, v in data.items()}


def trec_id(value: str) -> str:
    """An id as one TREC column: whitespace (a file name's spaces, a newline: TREC readers split
    lines on any whitespace), control characters and ``%`` are percent-encoded as UTF-8 bytes
    (``Spindle Bearing Guide`` → ``Spindle%20Bearing%20Guide``); every other character, CJK
    included, is kept. Run and qrels files escape alike, so ranx, trec_eval and ir_measures
    score them unchanged; :func:`untrec_id` reverses it."""
    if not _TREC_UNSAFE.search(value):
        return value
    return "".join(
        "".join(f"%{b:02X}" for b in ch.encode("utf-8")) if _TREC_UNSAFE.match(ch) else ch
        for ch in value
    )


def untrec_id(column: str) -> str:
    """An id read back from a TREC column written by :func:`trec_id`."""
    from urllib.parse import unquote

    return unquote(column, errors="strict") if "%" in column else column


def write_trec_run(out_dir: Path, run: Mapping[str, Mapping[str, float]], tag: str) -> Path:
    """The document run in TREC format (``qid Q0 doc_id rank score tag``, best first, ties by
    ascending id), so ranx, trec_eval and ir_measures read it with the dataset's qrels. trec_eval
    re-sorts by score and breaks ties its own way; ``rank`` is rag_lab's order. Ids are written
    with :func:`trec_id` (whitespace and ``%`` percent-encoded)."""
    from rag_lab.ranking import ranked

    path = out_dir / TREC_RUN_FILE
    tag = trec_id(tag)
    with atomic_open(path) as fh:
        for qid, scores in run.items():
            q = trec_id(qid)
            for rank, doc in enumerate(ranked(scores), 1):
                fh.write(f"{q} Q0 {trec_id(doc)} {rank} {scores[doc]!r} {tag}\n")
    return path


def write_trec_qrels(out_dir: Path, qrels: Mapping[str, Mapping[str, int]]) -> Path:
    """The split's judgments in TREC qrels format (``qid 0 doc_id grade``, grades as given,
    0 and negative included), so ``qrels.trec`` and ``run.trec`` together are all trec_eval, ranx
    or ir_measures need. Queries in ``qrels`` order, documents sorted; ids as in
    :func:`write_trec_run`."""
    path = out_dir / TREC_QRELS_FILE
    with atomic_open(path) as fh:
        for qid, grades in qrels.items():
            q = trec_id(qid)
            for doc in sorted(grades):
                fh.write(f"{q} 0 {trec_id(doc)} {int(grades[doc])}\n")
    return path


def read_trec_run(path: Path) -> dict[str, dict[str, float]]:
    """``run.trec`` back as ``{qid: {doc_id: score}}``, ids unescaped (:func:`untrec_id`)."""
    run: dict[str, dict[str, float]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            qid, _, doc, _, score, _ = line.split()
            run.setdefault(untrec_id(qid), {})[untrec_id(doc)] = float(score)
    return run


def read_trec_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``qrels.trec`` back as ``{qid: {doc_id: grade}}``, ids unescaped."""
    qrels: dict[str, dict[str, int]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            qid, _, doc, grade = line.split()
            qrels.setdefault(untrec_id(qid), {})[untrec_id(doc)] = int(grade)
    return qrels


def write_ingest_report(out_dir: Path, report: Mapping[str, Any]) -> Path:
    """``ingest_report.json`` (``rag_lab.pipeline.ingest``): per document pages, OCR pages, tables,
    sections, contract problems and seconds; the files skipped under ``parser.on_error=skip``."""
    path = out_dir / INGEST_REPORT_FILE
    data = dict(report)
    # a multirun's jobs write the same report: its compact spelling (C encoder, ~5x faster)
    # keys the indented text (pure-Python encoder, ~20 ms for 5,000 documents) of the last one
    key = json.dumps(data, ensure_ascii=False)
    text = _INGEST_TEXT.get(key)
    if text is None:
        text = json.dumps(data, indent=2, ensure_ascii=False)
        _INGEST_TEXT.clear()
        _INGEST_TEXT[key] = text
    write_atomic(path, text)
    return path


def write_config(out_dir: Path, resolved: Mapping[str, Any]) -> Path:
    """``config_resolved.yaml``: ``OmegaConf.to_yaml`` of the resolved config; one of plain
    YAML values only is dumped as that function dumps it, without building a config of it
    first (~10 ms a job)."""
    from omegaconf import OmegaConf

    from rag_lab.io.yaml_text import omegaconf_yaml

    path = out_dir / CONFIG_FILE
    data = dict(resolved)
    if _plain(data):  # the yaml.dump call of OmegaConf.to_yaml
        text = omegaconf_yaml(data)
    else:
        text = OmegaConf.to_yaml(data)
    write_atomic(path, text)
    return path


def _plain(value: Any) -> bool:
    """Only dicts with str keys, lists, str, int, float, bool and None (what ``OmegaConf.to_yaml``
    writes back unchanged)."""
    if isinstance(value, dict):
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


def write_answer_log(
    out_dir: Path, queries: Mapping[str, Any], rows: Mapping[str, Mapping[str, Any]]
) -> Path:
    """``answers.jsonl``: one line per answered query in the input format of ``rag-lab judge``
    (``id`` = query id, ``query``, ``retrieved_contexts``, ``response``, ``reference`` when the
    query has gold answers) plus the run's own ``faithfulness`` and ``answerable``, so a run's
    answers can be judged again, by other judges, and labelled (``rag-lab judge --labels``)."""
    path = out_dir / ANSWERS_FILE
    with atomic_open(path) as fh:
        for qid, row in rows.items():
            golds = [str(a) for a in (queries[qid].metadata.get("answers") or [])]
            rec = {
                "id": qid,
                "query": queries[qid].text,
                "retrieved_contexts": list(row["contexts"]),
                "response": row["response"],
                **({"reference": golds} if golds else {}),
                "faithfulness": row.get("faithfulness"),
                "answerable": row.get("answerable"),
            }
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path
