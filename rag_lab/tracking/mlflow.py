"""The one module that talks to MLflow.

Default store: a sqlite file under ``experiments/`` (no server); ``tracking.uri`` points at a
server (``http://host:5000``) or any other MLflow store.

A run is opened when its job starts (:meth:`MlflowTracker.start_run`) and closed when it ends
(:meth:`MlflowRun.end`: ``FINISHED``, ``FAILED``, ``KILLED``), so MLflow's duration is the job's.
Everything is written through ``MlflowClient.log_batch`` in batches of MLflow's own limits
(``mlflow.utils.validation``: 1000 metrics, 100 params, 100 tags, 1000 entities per call).

Names: :func:`mlflow_keys` changes only what MLflow refuses (``mlflow.utils.validation``): a
character other than Unicode word characters, ``-``, ``.``, space, ``/`` and ``:`` (``@`` becomes
``_at_``: ``ndcg@10`` → ``ndcg_at_10``), a name that reads as another path (``a//b``), and a name
longer than 250 characters (cut, with a short hash). Chinese names stay as they are
(``by_category/口语/ndcg_at_10``), and two names never become one key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.metrics.names import HEADLINE, higher_is_better, logged_keys, metric_key
from rag_lab.tracking import span_rows, trace_rows

if TYPE_CHECKING:
    import pandas as pd

    from rag_lab.tracking.traces import TraceRecord

log = logging.getLogger(__name__)
# the stores MLflow opens through SQLAlchemy (and checks the schema revision of)
SQL_SCHEMES = frozenset({"sqlite", "postgresql", "mysql", "mssql"})

# MLflow's limits (mlflow.utils.validation; checked against it in tests/tracking)
MAX_PARAM_LEN = 6000  # MAX_PARAM_VAL_LENGTH
MAX_TAG_LEN = 8000  # MAX_TAG_VAL_LENGTH
MAX_KEY_LEN = 250  # MAX_ENTITY_KEY_LENGTH
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_ENTITIES_PER_BATCH = 1000
SPANS_PER_CALL = 2000  # spans of many traces written in one log_spans call (one transaction)
STATUSES = ("FINISHED", "FAILED", "KILLED")
# MLflow's experiment kind (the tag and value its UI sets): an experiment that has none opens on
# its runs, not on MLflow 3's GenAI overview (which an experiment with traces gets by default)
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
# MLflow 3.17's UI ignores that tag: the browser's "workflow type" (GenAI by default) picks the
# navigation, and its runs table shows no metric column until a user picks them. So an experiment
# also gets a saved view of its runs table (the experiment tag MLflow's "Views" menu writes:
# ``mlflow.sharedViewState.<id>``) with the headline metrics as the first columns, sorted by
# ``ndcg_at_10``; :func:`runs_page_url` is the link that opens it as model training (printed by
# ``rag-lab evaluate``; what tests/tracking/test_mlflow_ui.py opens in Chromium).
RUNS_VIEW_ID = "rag_lab"
RUNS_VIEW_TAG = f"mlflow.sharedViewState.{RUNS_VIEW_ID}"
RUNS_VIEW_NAME = "rag_lab headline"
ML_WORKFLOW = "workflowType=machine_learning"  # the URL parameter of MLflow's workflow switch
VIEW_COLUMN_PX = 125  # a headline column's width: its name (``noise_ratio_at_5``) unclipped


def runs_view(columns: Sequence[str], sort: str) -> str:
    """The value of :data:`RUNS_VIEW_TAG`: MLflow's saved-view envelope (``name``, ``createdAt``,
    ``state``: the runs table's UI state as JSON) with the metric ``columns`` first, in this
    order, and the runs sorted by ``sort``, best first."""
    keys = [f"metrics.`{c}`" for c in columns]
    state = {
        "selectedColumns": [*keys, "attributes.`Dataset`"],
        "columnOrder": ["attributes.`Run Name`", *keys, "runDateAndNestInfo", "duration"],
        "columnWidths": dict.fromkeys(keys, VIEW_COLUMN_PX),
        "orderByKey": f"metrics.`{sort}`",
        "orderByAsc": not higher_is_better(sort),
    }
    return json.dumps(
        {"name": RUNS_VIEW_NAME, "createdAt": int(time.time() * 1000), "state": json.dumps(state)}
    )


def runs_page_url(uri: str, experiment_id: str) -> str | None:
    """The experiment's runs table in MLflow's UI at a server ``uri`` (``http[s]://``), in its
    model-training navigation with :data:`RUNS_VIEW_TAG`'s view; ``None`` for a store without a
    UI of its own (a sqlite file: ``mlflow ui`` serves it)."""
    if not uri.startswith(("http://", "https://")):
        return None
    return (
        f"{uri.rstrip('/')}/#/experiments/{experiment_id}/runs"
        f"?{ML_WORKFLOW}&viewStateShareKey={RUNS_VIEW_ID}"
    )


def trace_page_url(uri: str, experiment_id: str, trace_id: str) -> str:
    """One trace, opened in the experiment's Traces tab of MLflow's UI at the server ``uri``."""
    base = f"{uri.rstrip('/')}/#/experiments/{experiment_id}/traces"
    return f"{base}?{ML_WORKFLOW}&traceId={trace_id}"


sanitize_key = metric_key  # the one sanitiser (rag_lab.metrics.names); kept under this name


def mlflow_keys(names: Iterable[str]) -> dict[str, str]:
    """``{name: MLflow key}``: :func:`rag_lab.metrics.names.logged_keys` (what MLflow refuses
    replaced, colliding names kept apart), then a key over MLflow's 250 characters cut with a
    short hash of the name appended (MLflow refuses longer keys)."""
    out = {}
    for name, key in logged_keys(names).items():
        if len(key) > MAX_KEY_LEN:
            digest = hashlib.blake2b(name.encode(), digest_size=4).hexdigest()
            key = f"{key[: MAX_KEY_LEN - len(digest) - 1].rstrip('/')}_{digest}"
        out[name] = key
    return out


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


def fetch_experiment(name: str, tracking_uri: str) -> str:
    """The id of experiment ``name`` in an existing store; ``ConfigError`` naming what is
    missing (as :func:`fetch_run`)."""
    from mlflow.tracking import MlflowClient

    from rag_lab.errors import ConfigError

    if (
        tracking_uri.startswith("sqlite:///")
        and not Path(tracking_uri[len("sqlite:///") :]).is_file()
    ):
        raise ConfigError(f"no MLflow store at {tracking_uri}")
    exp = MlflowClient(tracking_uri=tracking_uri).get_experiment_by_name(name)
    if exp is None:
        raise ConfigError(f"no MLflow experiment {name!r} in {tracking_uri}")
    return str(exp.experiment_id)


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


def _new_ids(traces: Sequence[TraceRecord]) -> list[tuple[str, list[str]]]:
    """Fresh ids per trace: its own (``tr-`` and 32 hex digits, as MLflow's) and its spans' (16
    hex digits, the root's first), in this order from one draw of random bytes (a system call
    per id was ~1% of the writing); the tests draw them from a seeded generator to compare what
    two paths store."""
    import secrets

    blob = secrets.token_bytes(sum(16 + 8 * len(rec.spans) for rec in traces)).hex()
    out, at = [], 0
    for rec in traces:
        tid, at = f"tr-{blob[at : at + 32]}", at + 32
        spans = [blob[at + 16 * i : at + 16 * (i + 1)] for i in range(len(rec.spans))]
        out.append((tid, spans))
        at += 16 * len(rec.spans)
    return out


def _trace_entities(
    traces: Sequence[TraceRecord], exp_id: str, run_id: str
) -> tuple[list[Any], list[Any]]:
    """MLflow's ``TraceInfo`` (tags, the run link, assessments) and ``Span`` entities of
    ``traces`` in experiment ``exp_id``, each trace with a fresh id; the root span first."""
    from mlflow.entities import (
        AssessmentSource,
        Feedback,
        Span,
        TraceInfo,
        TraceLocation,
        TraceState,
    )
    from mlflow.tracing.constant import (
        TRACE_SCHEMA_VERSION,
        TRACE_SCHEMA_VERSION_KEY,
        SpanAttributeKey,
        TraceMetadataKey,
        TraceTagKey,
    )

    location = TraceLocation.from_experiment_id(exp_id)
    infos, spans = [], []
    for rec, (tid, span_ids) in zip(traces, _new_ids(traces), strict=True):
        root = rec.spans[0]
        root_id = span_ids[0]
        for i, sp in enumerate(rec.spans):
            attrs = {
                SpanAttributeKey.REQUEST_ID: json.dumps(tid),
                SpanAttributeKey.SPAN_TYPE: json.dumps(sp.kind),
                SpanAttributeKey.INPUTS: _json(sp.inputs),
                SpanAttributeKey.OUTPUTS: _json(sp.outputs),
                **{k: _json(v) for k, v in sp.attributes.items()},
            }
            start = sp.start_ns or root.start_ns
            spans.append(
                Span.from_dict(
                    {
                        "trace_id": tid,
                        "span_id": span_ids[i],
                        "parent_span_id": None if i == 0 else root_id,
                        "name": sp.name,
                        "start_time_unix_nano": start,
                        "end_time_unix_nano": max(sp.end_ns or start, start),
                        "status": {"code": "STATUS_CODE_OK", "message": ""},
                        "attributes": attrs,
                        "events": [],
                    }
                )
            )
        assessments: list[Any] = [
            Feedback(
                name=a.name,
                value=a.value,
                source=AssessmentSource(source_type=a.source_type, source_id=a.source_id),
                rationale=a.rationale,
                trace_id=tid,
            )
            for a in rec.assessments
        ]
        infos.append(
            TraceInfo(
                trace_id=tid,
                trace_location=location,
                request_time=root.start_ns // 1_000_000,
                state=TraceState.OK,
                execution_duration=max(root.end_ns - root.start_ns, 0) // 1_000_000,
                request_preview=_json(root.inputs)[:1000],
                response_preview=_json(root.outputs)[:1000],
                trace_metadata={
                    TraceMetadataKey.SOURCE_RUN: run_id,
                    TRACE_SCHEMA_VERSION_KEY: str(TRACE_SCHEMA_VERSION),
                },
                tags={TraceTagKey.TRACE_NAME: root.name, **rec.tags},
                assessments=assessments,
            )
        )
    return infos, spans


class _Deferred:
    """A session whose ``flush`` does nothing: ``_in_transactions`` flushes once for all the
    trace infos it started (MLflow's ``start_trace`` flushes each to catch a trace that exists
    already; these ids are fresh, and a clash still fails the transaction's own flush)."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def flush(self, objects: Any = None) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


# the SqlAlchemyStore members _in_transactions uses (MLflow 3.17's own code of start_trace and
# log_spans, minus their per-call session and retry)
_ONE_TRANSACTION = ("_start_trace_once", "_log_spans_once", "ManagedSessionMaker", "get_experiment")
TRACES_PER_TRANSACTION = 25  # the run's own writes (another thread) go in between


def _in_transactions(
    store: Any,
    infos: Sequence[Any],
    spans: Sequence[Any],
    exp_id: str,
    lock: Callable[[], Any],
    stop: Callable[[], bool] | None = None,
) -> int | None:
    """Write ``infos`` (``start_trace``) and their ``spans`` (``log_spans``) into a sqlite
    ``SqlAlchemyStore``, :data:`TRACES_PER_TRANSACTION` traces a transaction, each under
    ``lock()``, until ``stop()``; returns how many of ``infos`` (the first ones) were written,
    ``None``, with nothing written, for any other store.

    MLflow 3.17 has no batch call for trace infos and their assessments; ``start_trace`` commits
    each trace (a sqlite commit syncs the file) and reads the experiment again each time (~40%
    of its CPU). This runs the store's own per-trace code (``_start_trace_once``,
    ``_log_spans_once``: the same rows, tags, metadata, assessments and rollup markers as
    ``start_trace`` / ``log_spans``) on a shallow copy of the store whose sessions are one
    session per transaction and whose ``get_experiment`` is read once; the trace infos' own
    ``flush`` calls wait (:class:`_Deferred`), so one unit of work inserts all of a
    transaction's trace infos, tags, metadata and assessments (a flush per trace was ~half of
    ``start_trace``'s CPU), and its spans go as rows (:func:`span_rows.write_spans`, where
    it applies) or through one ``_log_spans_once``. Guarded: a store
    without those members, or whose methods no longer take these arguments (``TypeError``,
    ``AttributeError`` in the first transaction, rolled back) returns ``None`` and the caller
    writes trace by trace through the public calls (``tests/tracking/test_traces.py`` checks
    that both paths store the same traces)."""
    import copy
    import functools

    if (
        type(store).__name__ != "SqlAlchemyStore"
        or getattr(store, "db_type", None) != "sqlite"
        or not all(hasattr(store, name) for name in _ONE_TRANSACTION)
    ):
        return None
    rows = span_rows.applies(store)  # spans written as log_spans writes them (span_rows)
    batch = copy.copy(store)  # its own attributes: other threads keep the store's sessions
    batch.get_experiment = functools.lru_cache(maxsize=None)(store.get_experiment)
    by_trace: dict[str, list[Any]] = {}
    for sp in spans:
        by_trace.setdefault(sp.trace_id, []).append(sp)
    written = 0
    for n, part in enumerate(_batches(list(infos), TRACES_PER_TRANSACTION)):
        if stop is not None and stop():
            break
        try:
            with lock(), store.ManagedSessionMaker(read_only=False) as session:
                late = _Deferred(session)

                @contextmanager
                def deferred(*args: Any, _s: Any = late, **kwargs: Any) -> Iterator[Any]:
                    yield _s

                @contextmanager
                def same_session(*args: Any, _s: Any = session, **kwargs: Any) -> Iterator[Any]:
                    yield _s

                batch.ManagedSessionMaker = deferred
                for info in part:
                    batch._start_trace_once(info)
                session.flush()
                batch.ManagedSessionMaker = same_session
                mine = [sp for info in part for sp in by_trace.get(info.trace_id, [])]
                direct = rows and all(span_rows.finished(info) for info in part)
                if not (direct and span_rows.write_spans(session, exp_id, mine)):
                    for chunk in _batches(mine, SPANS_PER_CALL):
                        batch._log_spans_once(exp_id, list(chunk))
        except (TypeError, AttributeError) as exc:  # MLflow's internals moved
            if n:
                raise
            log.debug("traces: transaction writes unavailable (%s); one trace at a time", exc)
            return None
        written += len(part)
    return written


def _as_rows(
    store: Any,
    traces: Sequence[TraceRecord],
    exp_id: str,
    run_id: str,
    lock: Callable[[], Any],
    stop: Callable[[], bool] | None = None,
) -> list[str]:
    """Write ``traces`` as rows (:mod:`rag_lab.tracking.trace_rows`: what MLflow's own
    ``start_trace`` / ``log_spans`` would write, without their entities, ORM and translation)
    into a sqlite store, :data:`TRACES_PER_TRANSACTION` traces a transaction, each under
    ``lock()`` (the rows are built before it is taken), until ``stop()``; returns the ids of the
    traces written."""
    import time

    location = store.get_experiment(exp_id).artifact_location
    ids = _new_ids(traces)
    written: list[str] = []
    for start in range(0, len(traces), TRACES_PER_TRANSACTION):
        if stop is not None and stop():
            break
        part = slice(start, start + TRACES_PER_TRANSACTION)
        rows = trace_rows.rows(
            traces[part], ids[part], exp_id, run_id, location, int(time.time() * 1000)
        )
        with lock(), store.ManagedSessionMaker(read_only=False) as session:
            trace_rows.write(session, rows)
        written += [tid for tid, _ in ids[part]]
    return written


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
    traces: a trace per evaluated query: ``auto`` | ``all`` | ``sample:N`` | ``none``
        (``rag_lab.tracking.traces``; ``rag-lab evaluate`` reads it from the config).
    """

    def __init__(
        self,
        uri: str,
        experiment: str = "rag_lab",
        artifact_location: str | None = None,
        tags: Mapping[str, str] | None = None,
        on_error: str = "fail",
        local_uri: str | None = None,
        traces: str = "auto",
    ) -> None:
        from rag_lab.errors import ConfigError

        if on_error not in ON_ERROR:
            choices = " or ".join(ON_ERROR)
            raise ConfigError(f"tracking.on_error={on_error}: expected {choices}")
        self.uri, self.experiment, self.artifact_location = uri, experiment, artifact_location
        self.tags = dict(tags or {})
        self.on_error, self.local_uri = on_error, local_uri
        self.traces = traces

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

        from rag_lab.tracking.sqlite_template import remember_schema_head, seed

        if self.uri.split(":", 1)[0].split("+")[0] in SQL_SCHEMES:  # no SQL imports for http
            remember_schema_head()  # before the store opens: its schema check
        db = sqlite_path(self.uri)
        if db is not None:
            seed(db)
        mlflow.set_tracking_uri(self.uri)
        exp = mlflow.get_experiment_by_name(self.experiment)
        if exp is None:
            from mlflow.exceptions import MlflowException

            try:
                return mlflow, mlflow.create_experiment(
                    self.experiment,
                    artifact_location=self._artifact_uri(),
                    tags=dict([EXPERIMENT_KIND, (RUNS_VIEW_TAG, runs_view(HEADLINE, HEADLINE[0]))]),
                )
            except MlflowException as exc:
                # parallel jobs on a server (no store_lock there): another one created it first
                if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
                exp = mlflow.get_experiment_by_name(self.experiment)
                if exp is None:
                    raise
        # an experiment made before rag_lab set them gets them; a user's choice stays
        if EXPERIMENT_KIND[0] not in exp.tags:
            mlflow.MlflowClient(self.uri).set_experiment_tag(exp.experiment_id, *EXPERIMENT_KIND)
        if RUNS_VIEW_TAG not in exp.tags:
            view = runs_view(HEADLINE, HEADLINE[0])
            mlflow.MlflowClient(self.uri).set_experiment_tag(exp.experiment_id, RUNS_VIEW_TAG, view)
        return mlflow, exp.experiment_id

    def client(self) -> Any:
        """An ``MlflowClient`` of this store (after :meth:`connect`: the experiment exists)."""
        from mlflow.tracking import MlflowClient

        return MlflowClient(self.uri)

    def start_run(
        self,
        run_name: str,
        tags: Mapping[str, str] | None = None,
        parent_run_id: str | None = None,
    ) -> MlflowRun:
        """Open a run now (a child of ``parent_run_id`` when given) and return it; the caller
        logs to it as the job goes and closes it with :meth:`MlflowRun.end`. MLflow's start time
        is this call's, its end time that of ``end``. The run is tagged with this process (host,
        pid, start time); runs of the experiment whose process died first are marked ``KILLED``
        (:mod:`rag_lab.tracking.stale`)."""
        from rag_lab.tracking.stale import close_stale_runs, process_tags

        self.check()
        all_tags = {**self.tags, **(tags or {}), **process_tags()}
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        with store_lock(self.uri):
            _, exp_id = self._open()
            client = self.client()
            close_stale_runs(client, [exp_id])  # runs of processes killed before they ended
            run = client.create_run(exp_id, run_name=run_name, tags=_tag_values(all_tags))
        return MlflowRun(self, client, run.info.run_id)

    def start_parent(
        self,
        run_name: str,
        tags: Mapping[str, str],
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, str]:
        """Create a sweep's parent run with ``params`` (the sweep's search space, fixed overrides,
        objective), left open: children attach to it by id."""
        run = self.start_run(run_name, {**tags, "sweep": "parent"})
        if params:
            run.log_params(params)
        return {"run_id": run.run_id, "experiment_id": run.experiment_id, "uri": self.uri}

    def close_stale(self) -> list[str]:
        """Mark ``KILLED`` the runs of every experiment of this store left ``RUNNING`` by a
        process of this host that died (:func:`rag_lab.tracking.stale.close_stale_runs`)."""
        from rag_lab.tracking.stale import close_stale_runs

        self.check()
        with store_lock(self.uri):
            client = self.client()
            ids = [e.experiment_id for e in client.search_experiments()]
            return close_stale_runs(client, ids)

    def run_status(self, run_id: str) -> str | None:
        """``RUNNING`` | ``FINISHED`` | ``FAILED`` | ``KILLED`` of a run in this store; None when
        the store has no such run."""
        from mlflow.exceptions import MlflowException

        self.check()
        with store_lock(self.uri):
            self._open()
            try:
                return str(self.client().get_run(run_id).info.status)
            except MlflowException:
                return None

    def end_run(self, run_id: str, status: str, tags: Mapping[str, str] | None = None) -> None:
        """Close a run left open (a sweep's parent) with ``status`` (``KILLED``, ``FAILED``)."""
        self.check()
        with store_lock(self.uri):
            self._open()
            MlflowRun(self, self.client(), run_id).end(status, tags, locked=True)

    def finish_parent(
        self,
        run_id: str,
        metrics: Mapping[str, float],
        tags: Mapping[str, str],
        artifacts: list[Path],
    ) -> None:
        """Log a sweep's results on its parent run and close it ``FINISHED``."""
        self.check()
        with store_lock(self.uri):
            self._open()
            run = MlflowRun(self, self.client(), run_id)
            run.log_metrics(metrics, tags, locked=True)
            run.log_artifacts([("sweep", Path(a)) for a in artifacts], locked=True)
            run.end("FINISHED", locked=True)

    @contextmanager
    def active_run(
        self, run_name: str, params: Mapping[str, Any], tags: Mapping[str, str]
    ) -> Iterator[Any]:
        """An open run for step-wise logging (training: loss curves, dev metrics per step). Yields
        the ``mlflow`` module with the run active; use ``mlflow.log_metric(k, v, step=...)``."""
        mlflow, exp_id = self.connect()
        with mlflow.start_run(experiment_id=exp_id, run_name=run_name) as active:
            run = MlflowRun(self, self.client(), active.info.run_id)
            run.log_params(params, {**self.tags, **tags})
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
        """Log a finished run in one go (open, log, close ``FINISHED``; a child of
        ``parent_run_id`` when given); returns its run id. Non-finite metrics are skipped."""
        run = self.start_run(run_name, tags, parent_run_id)
        run.log_params(params)
        run.log_metrics(metrics)
        run.log_artifacts(artifacts)
        run.end("FINISHED")
        return run.run_id


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _tag_values(tags: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): _cut(str(v), MAX_TAG_LEN) for k, v in tags.items()}


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class MlflowRun:
    """One open run of a :class:`MlflowTracker`'s store. Every method writes through
    ``MlflowClient`` (``log_batch`` in batches of MLflow's limits) under :func:`store_lock`, held
    only for the call: parallel jobs on one sqlite store each keep a run open and take turns to
    write. ``locked=True``: the caller holds the lock already."""

    def __init__(self, tracker: MlflowTracker, client: Any, run_id: str) -> None:
        self.tracker, self.client, self.run_id = tracker, client, run_id

    @property
    def experiment_id(self) -> str:
        return str(self.client.get_run(self.run_id).info.experiment_id)

    @property
    def uri(self) -> str:
        return self.tracker.uri

    def page_url(self) -> str | None:
        """The experiment's runs in MLflow's UI (:func:`runs_page_url`); ``None`` without one."""
        return runs_page_url(self.uri, self.experiment_id)

    @contextmanager
    def _store(self, locked: bool) -> Iterator[None]:
        if locked:
            yield
        else:
            with store_lock(self.uri):
                yield

    def _batch(self, metrics: list[Any], params: list[Any], tags: list[Any], locked: bool) -> None:
        """``log_batch`` in as many calls as MLflow's limits need."""
        calls: list[tuple[list[Any], list[Any], list[Any]]] = []
        for chunk in _batches(metrics, MAX_METRICS_PER_BATCH):
            calls.append((list(chunk), [], []))
        for chunk in _batches(params, MAX_PARAMS_TAGS_PER_BATCH):
            calls.append(([], list(chunk), []))
        for chunk in _batches(tags, MAX_PARAMS_TAGS_PER_BATCH):
            calls.append(([], [], list(chunk)))
        # merge small calls while every limit holds (one call for a typical evaluate run's tags)
        merged: list[tuple[list[Any], list[Any], list[Any]]] = []
        for m, p, t in calls:
            if merged:
                pm, pp, pt = merged[-1]
                fits = (
                    len(pm) + len(m) <= MAX_METRICS_PER_BATCH
                    and len(pp) + len(p) <= MAX_PARAMS_TAGS_PER_BATCH
                    and len(pt) + len(t) <= MAX_PARAMS_TAGS_PER_BATCH
                    and len(pm) + len(pp) + len(pt) + len(m) + len(p) + len(t)
                    <= MAX_ENTITIES_PER_BATCH
                )
                if fits:
                    merged[-1] = (pm + m, pp + p, pt + t)
                    continue
            merged.append((m, p, t))
        with self._store(locked):
            for m, p, t in merged:
                self.client.log_batch(self.run_id, metrics=m, params=p, tags=t, synchronous=True)

    def log_params(
        self,
        params: Mapping[str, Any],
        tags: Mapping[str, Any] | None = None,
        locked: bool = False,
    ) -> None:
        """Nested ``params`` flattened (:func:`flatten`: ``retrievers.bm25.k1``), ``None`` as
        ``null``, values cut to MLflow's 6000 characters; ``tags`` with them."""
        from mlflow.entities import Param

        flat = flatten(dict(params))
        keys = mlflow_keys(flat)
        values = [
            Param(keys[k], _cut("null" if v is None else str(v), MAX_PARAM_LEN))
            for k, v in flat.items()
        ]
        self._batch([], values, self._tags(tags), locked)

    def set_tags(self, tags: Mapping[str, Any], locked: bool = False) -> None:
        self._batch([], [], self._tags(tags), locked)

    @staticmethod
    def _tags(tags: Mapping[str, Any] | None) -> list[Any]:
        from mlflow.entities import RunTag

        return [RunTag(k, v) for k, v in _tag_values(tags or {}).items()]

    def log_metrics(
        self,
        metrics: Mapping[str, Any],
        tags: Mapping[str, Any] | None = None,
        locked: bool = False,
    ) -> None:
        """Finite numbers of ``metrics`` (NaN, inf and non-numbers skipped: MLflow stores NaN
        poorly) under :func:`mlflow_keys`; ``tags`` with them."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        keys = mlflow_keys(metrics)
        values = [
            Metric(keys[k], float(v), now, 0)
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        ]
        self._batch(values, [], self._tags(tags), locked)

    def log_artifacts(
        self, artifacts: Mapping[str, Path] | Iterable[tuple[str, Path]], locked: bool = False
    ) -> None:
        """``{folder: file}`` or ``(folder, file)`` pairs (``""``: the run's root); files that do
        not exist are skipped."""
        pairs = artifacts.items() if isinstance(artifacts, Mapping) else artifacts
        with self._store(locked):
            for folder, path in pairs:
                if Path(path).is_file():
                    self.client.log_artifact(self.run_id, str(path), artifact_path=folder or None)

    def log_dataset(
        self,
        name: str,
        digest: str,
        source: str,
        context: str,
        profile: Mapping[str, Any] | None = None,
    ) -> None:
        """The run's input dataset (MLflow's Datasets column): ``name``, ``digest`` (rag_lab's
        fingerprint), ``source`` (its path), ``context`` (the split) and ``profile`` (counts)."""
        from mlflow.entities import Dataset, DatasetInput, InputTag
        from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

        dataset = Dataset(
            name=name,
            digest=digest[:36],  # MLflow's MAX_DATASET_DIGEST_SIZE
            source_type="local",
            source=json.dumps({"uri": source}),
            profile=json.dumps(dict(profile or {}), default=str),
        )
        from mlflow.exceptions import MlflowException

        inputs = [DatasetInput(dataset, [InputTag(MLFLOW_DATASET_CONTEXT, context)])]
        with self._store(False):
            try:
                self.client.log_inputs(self.run_id, inputs)
            except MlflowException:
                # parallel jobs on a server (no store_lock there) logging the same dataset: the
                # server checks for the dataset, then inserts it, and the slower job's insert
                # breaks the unique key (its transaction rolls back). Once more links the row
                # the faster job wrote; any other refusal is refused again and raised.
                self.client.log_inputs(self.run_id, inputs)

    def log_traces(
        self, traces: Sequence[TraceRecord], stop: Callable[[], bool] | None = None
    ) -> list[str]:
        """Write ``traces`` (``rag_lab.tracking.traces``) into this run's experiment, linked to
        the run, and return their trace ids. Built directly as MLflow's trace entities, not
        through its live tracer (which writes each span on its own as it ends: ~200 ms a query on
        a sqlite store): one ``start_trace`` per trace carries its tags, the run link and its
        assessments, and the spans go in batches of :data:`SPANS_PER_CALL`, one transaction each.

        On a sqlite store the traces and spans go :data:`TRACES_PER_TRANSACTION` traces a
        transaction: as rows of every trace table where :mod:`rag_lab.tracking.trace_rows`
        applies (:func:`_as_rows`: MLflow's version mirrored, plain records), else through the
        store's own per-trace code (:func:`_in_transactions`: a commit and a flush per 25
        traces, not per trace, the spans as rows where :mod:`rag_lab.tracking.span_rows`
        applies); elsewhere
        (a server, or a store whose internals moved) the store's lock (:func:`store_lock`) is
        taken per call, not for the whole batch, so the run's other writes (from another
        thread: ``rag_lab.tracking.evaluation.start_query_traces``) go in between. ``stop()``
        true: no further trace is started (the ids written so far are returned; spans go only
        with their trace)."""
        from mlflow.tracing.client import TracingClient

        if not traces:
            return []
        exp_id = self.experiment_id
        client = TracingClient(self.uri)
        if span_rows.applies(client.store) and trace_rows.plain(traces):
            return _as_rows(
                client.store, traces, exp_id, self.run_id, lambda: self._store(False), stop
            )
        infos, spans = _trace_entities(traces, exp_id, self.run_id)
        ids = [info.trace_id for info in infos]
        done = _in_transactions(
            client.store, infos, spans, exp_id, lambda: self._store(False), stop
        )
        if done is not None:
            return ids[:done]
        written: set[str] = set()
        for info in infos:
            if stop is not None and stop():
                break
            with self._store(False):
                client.start_trace(info)
            written.add(info.trace_id)
        spans = [sp for sp in spans if sp.trace_id in written]
        for chunk in _batches(spans, SPANS_PER_CALL):
            with self._store(False):
                client.log_spans(exp_id, list(chunk))
        return [tid for tid in ids if tid in written]

    def log_table(self, table: pd.DataFrame, artifact_file: str) -> None:
        """``table`` as an MLflow table artifact (``.json``: previewable in the run's artifacts
        and in the evaluation view)."""
        with self._store(False):
            self.client.log_table(self.run_id, data=table, artifact_file=artifact_file)

    def end(
        self, status: str = "FINISHED", tags: Mapping[str, Any] | None = None, locked: bool = False
    ) -> None:
        """Close the run with ``status`` (``FINISHED`` | ``FAILED`` | ``KILLED``), ``tags``
        first (e.g. the error that ended it)."""
        if status not in STATUSES:
            raise ValueError(f"run status {status!r}: expected one of {', '.join(STATUSES)}")
        with self._store(locked):
            if tags:
                self.set_tags(tags, locked=True)
            self.client.set_terminated(self.run_id, status=status)
