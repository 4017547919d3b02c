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

from rag_lab.metrics.names import logged_keys, metric_key

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


ON_ERROR = ("fail", "local")
PROBE_TIMEOUT_S = 2.0


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` store; None for any other URI."""
    return Path(uri[len("sqlite:///") :]) if uri.startswith("sqlite:///") else None


def probe(uri: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the MLflow server at an ``http(s)://`` ``uri`` does not answer (``None`` when it does,
    or for any other kind of URI): one GET of ``<uri>/health`` with a short ``timeout``. MLflow
    itself retries a dead server for minutes before it gives up; any HTTP answer (even 401 or
    404: a proxy, an auth layer) counts as alive, only no answer counts as dead."""
    import urllib.error
    import urllib.request

    if not uri.startswith(("http://", "https://")):
        return None
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None
    except urllib.error.URLError as exc:
        return str(exc.reason)
    except (OSError, ValueError) as exc:  # a timeout, a malformed host or port
        return str(exc) or type(exc).__name__


@contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Exclusive across processes for a sqlite store (``flock`` on ``<db>.lock``): MLflow creates
    and migrates a new store's tables on first use, and parallel jobs doing that at once die in
    alembic migrations; sqlite also refuses concurrent writers. No-op for other stores."""
    db = sqlite_path(uri)
    if db is None:
        yield
        return
    import fcntl

    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        handle = open(f"{db}.lock", "a")  # noqa: SIM115 (closed below, after the unlock)
    except OSError as exc:
        from rag_lab.errors import ConfigError

        raise ConfigError(
            f"tracking.uri={uri}: cannot write beside the store ({db}.lock: {exc.strerror})"
        ) from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class MlflowTracker:
    """Args:
    uri: MLflow tracking URI (``sqlite:///experiments/mlflow.db``, ``http://127.0.0.1:5000``).
    experiment: experiment name.
    artifact_location: where a *new* experiment stores artifacts; ``None`` = beside a sqlite store
        (``<db folder>/mlartifacts``), the server's default for a server.
    tags: extra tags on every run.
    on_error: a server at ``uri`` that does not answer: ``fail`` (``ConfigError`` naming the URI,
        in seconds) or ``local`` (warn and log to ``local_uri`` instead).
    local_uri: the store ``on_error=local`` falls back to (default: ``experiments/mlflow.db``).
    """

    def __init__(
        self,
        uri: str,
        experiment: str = "rag_lab",
        artifact_location: str | None = None,
        tags: Mapping[str, str] | None = None,
        on_error: str = "fail",
        local_uri: str | None = None,
    ) -> None:
        from rag_lab.errors import ConfigError

        if on_error not in ON_ERROR:
            choices = " or ".join(ON_ERROR)
            raise ConfigError(f"tracking.on_error={on_error}: expected {choices}")
        self.uri, self.experiment, self.artifact_location = uri, experiment, artifact_location
        self.tags = dict(tags or {})
        self.on_error, self.local_uri = on_error, local_uri

    def check(self) -> None:
        """Probe a server ``uri`` (:func:`probe`, a couple of seconds at most): raise
        ``ConfigError`` naming the URI, or with ``on_error=local`` warn and switch to the local
        store for good. Every use of the store calls it (a server may die during a long job);
        call it before a long job to fail before the work."""
        reason = probe(self.uri)
        if reason is not None:
            if self.on_error == "fail":
                from rag_lab.errors import ConfigError

                raise ConfigError(
                    f"tracking.uri={self.uri}: no MLflow server answers ({reason}); start it, "
                    f"fix tracking.uri, or set tracking.on_error=local (or tracking=none)"
                )
            from rag_lab.paths import default_tracking_uri

            local = self.local_uri or default_tracking_uri()
            log.warning(
                "tracking.uri=%s: no MLflow server answers (%s); logging to %s instead "
                "(tracking.on_error=local)",
                self.uri,
                reason,
                local,
            )
            self.uri = local

    def _artifact_uri(self) -> str | None:
        """The artifact location of a new experiment, as a URI (see ``artifact_location``)."""
        loc = self.artifact_location
        db = sqlite_path(self.uri)
        if not loc:
            return (db.parent / "mlartifacts").resolve().as_uri() if db is not None else None
        return Path(loc).resolve().as_uri() if "://" not in loc else loc

    def connect(self) -> tuple[Any, str]:
        """``(mlflow module, experiment id)`` with the tracking URI set and the experiment created
        if needed (a new sqlite store's folder and tables too, under :func:`store_lock`)."""
        self.check()
        with store_lock(self.uri):
            return self._open()

    def _open(self) -> tuple[Any, str]:
        """:meth:`connect` for a caller that holds :func:`store_lock` (``flock`` is not re-entrant
        across file descriptions: taking it twice in one process deadlocks)."""
        import mlflow

        mlflow.set_tracking_uri(self.uri)
        exp = mlflow.get_experiment_by_name(self.experiment)
        if exp is None:
            return mlflow, mlflow.create_experiment(
                self.experiment, artifact_location=self._artifact_uri()
            )
        return mlflow, exp.experiment_id

    def start_parent(self, run_name: str, tags: Mapping[str, str]) -> dict[str, str]:
        """Create a sweep's parent run (left open: children attach to it by id)."""
        self.check()
        with store_lock(self.uri):
            mlflow, exp_id = self._open()
            client = mlflow.tracking.MlflowClient(self.uri)
            run = client.create_run(
                exp_id, run_name=run_name, tags={**self.tags, **tags, "sweep": "parent"}
            )
        return {"run_id": run.info.run_id, "experiment_id": exp_id, "uri": self.uri}

    def run_status(self, run_id: str) -> str | None:
        """``RUNNING`` | ``FINISHED`` | ``FAILED`` | ``KILLED`` of a run in this store; None when
        the store has no such run."""
        from mlflow.exceptions import MlflowException

        self.check()
        with store_lock(self.uri):
            mlflow, _ = self._open()
            try:
                return str(mlflow.tracking.MlflowClient(self.uri).get_run(run_id).info.status)
            except MlflowException:
                return None

    def end_run(self, run_id: str, status: str, tags: Mapping[str, str] | None = None) -> None:
        """Close a run left open (a sweep's parent) with ``status`` (``KILLED``, ``FAILED``)."""
        self.check()
        with store_lock(self.uri):
            mlflow, _ = self._open()
            client = mlflow.tracking.MlflowClient(self.uri)
            for tag, text in (tags or {}).items():
                client.set_tag(run_id, tag, str(text)[:5000])
            client.set_terminated(run_id, status=status)

    def finish_parent(
        self,
        run_id: str,
        metrics: Mapping[str, float],
        tags: Mapping[str, str],
        artifacts: list[Path],
    ) -> None:
        self.check()
        with store_lock(self.uri):
            mlflow, _ = self._open()
            client = mlflow.tracking.MlflowClient(self.uri)
            keys = logged_keys(metrics)
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and math.isfinite(v):
                    client.log_metric(run_id, keys[k], float(v))
            for tag, text in tags.items():
                client.set_tag(run_id, tag, str(text)[:5000])
            for path in artifacts:
                if Path(path).exists():
                    client.log_artifact(run_id, str(path), artifact_path="sweep")
            client.set_terminated(run_id)

    @staticmethod
    def _log_params(mlflow, params: Mapping[str, Any]) -> None:
        clean = {}
        flat = flatten(dict(params))
        keys = logged_keys(flat)
        for k, v in flat.items():
            s = "null" if v is None else str(v)
            clean[keys[k]] = s if len(s) <= MAX_PARAM_LEN else s[: MAX_PARAM_LEN - 3] + "..."
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
        metrics are skipped (MLflow stores NaN poorly). Holds :func:`store_lock` throughout:
        parallel jobs on one sqlite store take turns instead of failing on a locked database."""
        self.check()
        if parent_run_id:
            tags = {**tags, "mlflow.parentRunId": parent_run_id}
        with store_lock(self.uri):
            mlflow, exp_id = self._open()
            return self._log(mlflow, exp_id, run_name, params, metrics, tags, artifacts)

    def _log(
        self,
        mlflow: Any,
        exp_id: str,
        run_name: str,
        params: Mapping[str, Any],
        metrics: Mapping[str, float],
        tags: Mapping[str, str],
        artifacts: Mapping[str, Path],
    ) -> str:
        with mlflow.start_run(experiment_id=exp_id, run_name=run_name) as run:
            mlflow.set_tags({**self.tags, **tags})
            self._log_params(mlflow, params)
            keys = logged_keys(metrics)
            mlflow.log_metrics(
                {
                    keys[k]: float(v)
                    for k, v in metrics.items()
                    if isinstance(v, (int, float)) and math.isfinite(v)
                }
            )
            for subdir, path in artifacts.items():
                if Path(path).exists():
                    mlflow.log_artifact(str(path), artifact_path=subdir or None)
            return run.info.run_id
