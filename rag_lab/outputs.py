"""The files of a run folder, written in one place: what ``rag-lab gate`` and ``rag-lab export``
read back as a side (``metrics.json``, ``per_query.parquet``, ``dataset_fingerprint``), plus the
resolved config of an evaluate run, its document run as a TREC file (``run.trec``) and the
ingest report (``ingest_report.json``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

METRICS_FILE = "metrics.json"
PER_QUERY_FILE = "per_query.parquet"
FINGERPRINT_FILE = "dataset_fingerprint"
CONFIG_FILE = "config_resolved.yaml"
MLFLOW_RUN_FILE = "mlflow_run_id"
TREC_RUN_FILE = "run.trec"
INGEST_REPORT_FILE = "ingest_report.json"


def write_scores(
    out_dir: Path, metrics: Mapping[str, Any], table: pd.DataFrame, fingerprint: str
) -> None:
    """``metrics.json`` (NaN kept), ``per_query.parquet`` and ``dataset_fingerprint``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / METRICS_FILE).write_text(
        json.dumps(dict(metrics), indent=2, sort_keys=True, allow_nan=True)
    )
    (out_dir / FINGERPRINT_FILE).write_text(fingerprint)
    table.to_parquet(out_dir / PER_QUERY_FILE, index=False)


def write_trec_run(out_dir: Path, run: Mapping[str, Mapping[str, float]], tag: str) -> Path:
    """The document run in TREC format (``qid Q0 doc_id rank score tag``, best first, ties by
    ascending id), so ranx, trec_eval and ir_measures read it with the dataset's qrels. trec_eval
    re-sorts by score and breaks ties its own way; ``rank`` is rag_lab's order."""
    from rag_lab.ranking import ranked

    path = out_dir / TREC_RUN_FILE
    with path.open("w", encoding="utf-8") as fh:
        for qid, scores in run.items():
            for rank, doc in enumerate(ranked(scores), 1):
                fh.write(f"{qid} Q0 {doc} {rank} {scores[doc]!r} {tag}\n")
    return path


def write_ingest_report(out_dir: Path, report: Mapping[str, Any]) -> Path:
    """``ingest_report.json`` (``rag_lab.ingest``): per document pages, OCR pages, tables,
    sections, contract problems and seconds; the files skipped under ``parser.on_error=skip``."""
    path = out_dir / INGEST_REPORT_FILE
    path.write_text(json.dumps(dict(report), indent=2, ensure_ascii=False))
    return path


def write_config(out_dir: Path, resolved: Mapping[str, Any]) -> Path:
    from omegaconf import OmegaConf

    path = out_dir / CONFIG_FILE
    path.write_text(OmegaConf.to_yaml(dict(resolved)))
    return path
