"""Read back a run that ``rag-lab evaluate`` logged to MLflow, as the run folder it wrote.

The one place that knows that layout on the MLflow side: artifacts ``config_resolved.yaml``,
``metrics/metrics.json`` and ``tables/per_query.parquet``, tag ``dataset_fingerprint``. The gate
reads the folder as a side, ``rag-lab export --mlflow-run`` exports it like a local run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Collection
from pathlib import Path

from rag_lab.errors import ConfigError
from rag_lab.paths import default_tracking_uri
from rag_lab.tracking.mlflow import fetch_run

CONFIG = "config_resolved.yaml"
METRICS = "metrics/metrics.json"
PER_QUERY = "tables/per_query.parquet"
ARTIFACTS = (CONFIG, METRICS, PER_QUERY)
FINGERPRINT = "dataset_fingerprint"  # the tag, and the file beside metrics.json in a run folder
RUN_ID_FILE = "mlflow_run_id"


def resolve_tracking_uri(given: str | None = None) -> str:
    """``given``, else ``$MLFLOW_TRACKING_URI``, else the store under ``experiments/``."""
    return given or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri()


def download_run(run_id: str, uri: str, dest: Path, required: Collection[str] = ARTIFACTS) -> Path:
    """Write the run folder of MLflow run ``run_id`` at ``uri`` into ``dest``: each of
    :data:`ARTIFACTS` that was logged (``config_resolved.yaml``, ``metrics.json``,
    ``per_query.parquet``, flat), ``dataset_fingerprint`` when the run has the tag, and
    ``mlflow_run_id``. Returns ``dest``.

    Raises :class:`ConfigError` naming the run when the store or run does not exist, or when an
    artifact in ``required`` was not logged (``required`` entries are names from
    :data:`ARTIFACTS`)."""
    from mlflow.exceptions import MlflowException

    client, run = fetch_run(run_id, uri)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rag_lab_fetch_") as tmp:
        for artifact in ARTIFACTS:
            try:
                got = Path(client.download_artifacts(run_id, artifact, tmp))
            except (MlflowException, OSError):
                if artifact in required:
                    raise ConfigError(
                        f"MLflow run {run_id} has no {artifact} artifact "
                        f"(not a rag-lab evaluate run?)"
                    ) from None
                continue
            shutil.move(str(got), str(dest / got.name))
    fingerprint = run.data.tags.get(FINGERPRINT)
    if fingerprint:
        (dest / FINGERPRINT).write_text(fingerprint)
    (dest / RUN_ID_FILE).write_text(run_id)
    return dest
