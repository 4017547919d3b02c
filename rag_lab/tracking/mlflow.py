"""The one module that talks to MLflow.

Default store: a sqlite file under ``experiments/`` (no server); ``tracking.uri`` points at a
server (``http://host:5000``) or any other MLflow store. Metric keys are sanitised (MLflow rejects
``@``: ``ndcg@10`` → ``ndcg_at_10``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rag_lab.metrics.names import metric_key

log = logging.getLogger(__name__)
MAX_PARAM_LEN = 6000


sanitize_key = metric_key  # the one sanitiser (rag_lab.metrics.names); kept under this name


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts/lists → ``{"retrievers.bm25.k1": 1.2, "fusion.weights.dense": 0.7}``."""
    out: dict[str, Any] = {}
    if isinstance(tree, Mapping):
        if not tree and prefix:
            out[prefix] = "{}"
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(tree, (list, tuple)) and any(
        isinstance(v, (Mapping, list, tuple)) for v in tree
    ):
        for i, v in enumerate(tree):
            out.update(flatten(v, f"{prefix}.{i}"))
    else:
        out[prefix] = tree
    return out


def fetch_run(run_id: str, tracking_uri: str) -> tuple[Any, Any]:
    """``(MlflowClient, Run)`` for a run in an existing store; ``ConfigError`` naming what is
    missing (a sqlite store that does not exist is refused: MLflow would silently create an empty
    one)."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from rag_lab.errors import ConfigError

    if (
        tracking_uri.startswith("sqlite:///")
        and not Path(tracking_uri[len("sqlite:///") :]).is_file()
    ):
        raise ConfigError(f"no MLflow store at {tracking_uri}")
    client = MlflowClient(tracking_uri=tracking_uri)
    try:
        return client, client.get_run(run_id)
    except MlflowException as exc:
        raise ConfigError(
            f"MLflow run {run_id!r} not found in {tracking_uri} ({exc.message.splitlines()[0]})"
        ) from None


class MlflowTracker:
    """Args:
    uri: MLflow tracking URI (``sqlite:///experiments/mlflow.db``, ``http://127.0.0.1:5000``).
    experiment: experiment name.
    artifact_location: where a *new* experiment stores artifacts (``None`` = the server's default).
    tags: extra tags on every run.
    """

    def __init__(
        self,
        uri: str,
        experiment: str = "rag_lab",
        artifact_location: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self.uri, self.experiment, self.artifact_location = uri, experiment, artifact_location
        self.tags = dict(tags or {})

    def connect(self) -> tuple[Any, str]:
        """``(mlflow module, experiment id)`` with the tracking URI set and the experiment created
        if needed (a new sqlite store's folder too)."""
        import mlflow

        if self.uri.startswith("sqlite:///"):
            Path(self.uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        mlflow.set_tracking_uri(self.uri)
        exp = mlflow.get_experiment_by_name(self.experiment)
        if exp is None:
            loc = (
                Path(self.artifact_location).resolve().as_uri()
                if self.artifact_location and "://" not in self.artifact_location
                else self.artifact_location
            )
            exp_id = mlflow.create_experiment(self.experiment, artifact_location=loc)
        else:
            exp_id = exp.experiment_id
        return mlflow, exp_id

    def start_parent(self, run_name: str, tags: Mapping[str, str]) -> dict[str, str]:
        """Create a sweep's parent run (left open: children attach to it by id)."""
        mlflow, exp_id = self.connect()
        client = mlflow.tracking.MlflowClient(self.uri)
        run = client.create_run(
            exp_id, run_name=run_name, tags={**self.tags, **tags, "sweep": "parent"}
        )
        return {"run_id": run.info.run_id, "experiment_id": exp_id, "uri": self.uri}

    def finish_parent(
        self,
        run_id: str,
        metrics: Mapping[str, float],
        tags: Mapping[str, str],
        artifacts: list[Path],
    ) -> None:
        mlflow, _ = self.connect()
        client = mlflow.tracking.MlflowClient(self.uri)
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and math.isfinite(v):
                client.log_metric(run_id, sanitize_key(k), float(v))
        for tag, text in tags.items():
            client.set_tag(run_id, tag, str(text)[:5000])
        for path in artifacts:
            if Path(path).exists():
                client.log_artifact(run_id, str(path), artifact_path="sweep")
        client.set_terminated(run_id)

    @staticmethod
    def _log_params(mlflow, params: Mapping[str, Any]) -> None:
        clean = {}
        for k, v in flatten(dict(params)).items():
            s = "null" if v is None else str(v)
            clean[sanitize_key(k)] = (
                s if len(s) <= MAX_PARAM_LEN else s[: MAX_PARAM_LEN - 3] + "..."
            )
        items = list(clean.items())
        for i in range(0, len(items), 100):  # MLflow's batch limit
            mlflow.log_params(dict(items[i : i + 100]))

    @contextmanager
    def active_run(
        self, run_name: str, params: Mapping[str, Any], tags: Mapping[str, str]
    ) -> Iterator[Any]:
        """An open run for step-wise logging (training: loss curves, dev metrics per step). Yields
        the ``mlflow`` module with the run active; use ``mlflow.log_metric(k, v, step=...)``."""
        mlflow, exp_id = self.connect()
        with mlflow.start_run(experiment_id=exp_id, run_name=run_name):
            mlflow.set_tags({**self.tags, **tags})
            self._log_params(mlflow, params)
            yield mlflow

    def log_run(
        self,
        run_name: str,
        params: Mapping[str, Any],
        metrics: Mapping[str, float],
        tags: Mapping[str, str],
        artifacts: Mapping[str, Path],
        parent_run_id: str | None = None,
    ) -> str:
        """Log one run (a child of ``parent_run_id`` when given); returns its run id. Non-finite
        metrics are skipped (MLflow stores NaN poorly)."""
        mlflow, exp_id = self.connect()
        if parent_run_id:
            tags = {**tags, "mlflow.parentRunId": parent_run_id}
        with mlflow.start_run(experiment_id=exp_id, run_name=run_name) as run:
            mlflow.set_tags({**self.tags, **tags})
            self._log_params(mlflow, params)
            mlflow.log_metrics(
                {
                    sanitize_key(k): float(v)
                    for k, v in metrics.items()
                    if isinstance(v, (int, float)) and math.isfinite(v)
                }
            )
            for subdir, path in artifacts.items():
                if Path(path).exists():
                    mlflow.log_artifact(str(path), artifact_path=subdir or None)
            return run.info.run_id
