"""Whole traces written as rows: every row MLflow's ``start_trace`` and ``log_spans`` write for
a rag_lab trace (``trace_info``, ``trace_tags``, ``trace_request_metadata``, ``assessments``,
``spans``), built from rag_lab's plain :class:`~rag_lab.tracking.traces.TraceRecord` without
MLflow's entities, its ORM or its OTel span translation, and inserted with one ``executemany``
per table in the caller's transaction (``rag_lab.tracking.mlflow._as_rows``).

What MLflow writes for such a trace (read in the source of the versions of
:data:`rag_lab.tracking.span_rows.MLFLOW_VERSIONS`; ``tests/tracking/test_traces.py`` checks
every row of every trace table against MLflow's own ``start_trace`` / ``log_spans``):

- ``trace_info``: the trace's id, experiment, request time and duration (ms), state, previews
  and name (the ``mlflow.traceName`` tag), ``db_payload_generation`` 1 (``log_spans`` raises the
  0 of ``start_trace`` by one);
- ``trace_tags``: the trace's tags but its name, ``mlflow.artifactLocation``
  (``<experiment artifacts>/traces/<id>/artifacts``) and ``mlflow.trace.spansLocation``;
- ``trace_request_metadata``: the metadata and ``mlflow.trace.infoFinalized`` = ``true``;
- ``assessments``: each feedback as ``SqlAssessments.from_mlflow_entity`` has it (a fresh
  ``a-<uuid4 hex>`` id, its value as JSON, the aggregate columns of MLflow's
  ``assessment_aggregate``, valid);
- ``spans``: a row per span, its content the span's ``to_dict()`` (what
  ``translate_span_when_storing`` returns for a span with no attribute it translates) as JSON
  without ASCII escapes.

Only for a trace :func:`plain` accepts (attributes MLflow's translation and ``log_spans`` do not
read, no ``model`` in a dict input or output, no NUL in a preview, no ``mlflow.`` tag); the caller
writes anything else through MLflow's own code."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rag_lab.tracking.span_rows import span_row

if TYPE_CHECKING:
    from rag_lab.tracking.traces import TraceRecord

# the attributes every span carries (MLflow's SpanAttributeKey: request id, type, inputs, outputs)
SPAN_KEYS = ("mlflow.traceRequestId", "mlflow.spanType", "mlflow.spanInputs", "mlflow.spanOutputs")
OWN_ATTRIBUTES = "rag_lab."  # rag_lab's own span attributes: no translator reads this prefix
# the tables written, parents first (their foreign keys point at trace_info)
TABLES = ("trace_info", "trace_tags", "trace_request_metadata", "assessments", "spans")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def plain(traces: Sequence[TraceRecord]) -> bool:
    """Whether MLflow's ``start_trace`` / ``log_spans`` would write for ``traces`` exactly the
    rows :func:`rows` builds: span attributes only rag_lab's own (``rag_lab.*``: none of them
    token usage, cost, model, session, user or an OTel convention a translator reads), a span
    type, no dict input or output with a ``model`` (``log_spans`` would take it as the span's
    model), previews without NUL (MLflow 3.18 replaces it), no ``mlflow.*`` tag."""
    for rec in traces:
        if any(k.startswith("mlflow.") for k in rec.tags):
            return False
        for sp in rec.spans:
            if not sp.kind or sp.kind == "UNKNOWN":
                return False
            if any(not k.startswith(OWN_ATTRIBUTES) for k in sp.attributes):
                return False
            for value in (sp.inputs, sp.outputs):
                if isinstance(value, Mapping) and "model" in value:
                    return False
        root = rec.spans[0]
        if "\x00" in _json(root.inputs)[:1000] + _json(root.outputs)[:1000]:
            return False
    return True


def _assessments(
    rec: TraceRecord, tid: str, exp: int, request_ms: int, now_ms: int
) -> list[dict[str, Any]]:
    """``SqlAssessments.from_mlflow_entity`` of the trace's feedbacks."""
    from mlflow.store.tracking.utils.trace_analytics import assessment_aggregate

    out = []
    for a in rec.assessments:
        aggregate, numeric = assessment_aggregate(a.value)
        out.append(
            {
                "assessment_id": f"a-{uuid.uuid4().hex}",
                "trace_id": tid,
                "name": a.name,
                "assessment_type": "feedback",
                "value": json.dumps(a.value),
                "error": None,
                "created_timestamp": now_ms,
                "last_updated_timestamp": now_ms,
                "source_type": a.source_type,
                "source_id": a.source_id,
                "run_id": None,
                "span_id": None,
                "rationale": a.rationale,
                "overrides": None,
                "valid": True,
                "assessment_metadata": None,
                "experiment_id": exp,
                "trace_timestamp_ms": request_ms,
                "aggregate_value": aggregate,
                "is_numeric_value": numeric,
            }
        )
    return out


def _spans(rec: TraceRecord, tid: str, span_ids: Sequence[str], exp: int) -> list[dict[str, Any]]:
    """The trace's ``spans`` rows: MLflow's ``Span.to_dict()`` of each span as its content."""
    root = rec.spans[0]
    trace_b64, root_id, request = _b64(tid[3:]), span_ids[0], json.dumps(tid)
    out = []
    for i, (sp, sid) in enumerate(zip(rec.spans, span_ids, strict=True)):
        start = sp.start_ns or root.start_ns
        end = max(sp.end_ns or start, start)
        parent = None if i == 0 else root_id
        own = (request, json.dumps(sp.kind), _json(sp.inputs), _json(sp.outputs))
        attributes = dict(zip(SPAN_KEYS, own, strict=True))
        attributes.update((k, _json(v)) for k, v in sp.attributes.items())
        content: dict[str, Any] = {
            "trace_id": trace_b64,
            "span_id": _b64(sid),
            "parent_span_id": None if parent is None else _b64(parent),
            "name": sp.name,
            "kind": "SPAN_KIND_INTERNAL",
            "start_time_unix_nano": start,
            "end_time_unix_nano": end,
            "events": [],
            "status": {"code": "STATUS_CODE_OK", "message": ""},
            "attributes": attributes,
            "links": [],
        }
        text = json.dumps(content, ensure_ascii=False)
        out.append(span_row(tid, exp, sid, parent, sp.name, sp.kind, "OK", start, end, text))
    return out


def rows(
    traces: Sequence[TraceRecord],
    ids: Sequence[tuple[str, Sequence[str]]],
    exp_id: str,
    run_id: str,
    artifact_location: str,
    now_ms: int,
) -> dict[str, list[dict[str, Any]]]:
    """The rows of ``traces`` by table (module docstring): ``ids`` per trace its id
    (``tr-<32 hex>``) and its spans' ids (16 hex, the root's first), ``artifact_location`` the
    experiment's, ``now_ms`` the assessments' creation time."""
    from mlflow.tracing.constant import (
        TRACE_SCHEMA_VERSION,
        TRACE_SCHEMA_VERSION_KEY,
        SpansLocation,
        TraceMetadataKey,
        TraceTagKey,
    )
    from mlflow.utils.mlflow_tags import MLFLOW_ARTIFACT_LOCATION
    from mlflow.utils.uri import append_to_uri_path

    exp = int(exp_id)
    metadata = {
        TraceMetadataKey.SOURCE_RUN: run_id,
        TRACE_SCHEMA_VERSION_KEY: str(TRACE_SCHEMA_VERSION),
        TraceMetadataKey.TRACE_INFO_FINALIZED: "true",
    }
    spans_location = SpansLocation.TRACKING_STORE.value
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
    for rec, (tid, span_ids) in zip(traces, ids, strict=True):
        root = rec.spans[0]
        request_ms = root.start_ns // 1_000_000
        out["trace_info"].append(
            {
                "request_id": tid,
                "experiment_id": exp,
                "timestamp_ms": request_ms,
                "execution_time_ms": max(root.end_ns - root.start_ns, 0) // 1_000_000,
                "status": "OK",
                "client_request_id": None,
                "request_preview": _json(root.inputs)[:1000],
                "response_preview": _json(root.outputs)[:1000],
                "trace_name": root.name,
                "db_payload_generation": 1,
            }
        )
        tags = {
            **rec.tags,
            MLFLOW_ARTIFACT_LOCATION: append_to_uri_path(
                artifact_location, "traces", tid, "artifacts"
            ),
            TraceTagKey.SPANS_LOCATION: spans_location,
        }
        out["trace_tags"] += [{"request_id": tid, "key": k, "value": v} for k, v in tags.items()]
        out["trace_request_metadata"] += [
            {"request_id": tid, "key": k, "value": v} for k, v in metadata.items()
        ]
        out["assessments"] += _assessments(rec, tid, exp, request_ms, now_ms)
        out["spans"] += _spans(rec, tid, span_ids, exp)
    return out


def write(session: Any, table_rows: Mapping[str, list[dict[str, Any]]]) -> None:
    """Insert :func:`rows`' rows in ``session``'s transaction, parents first (one
    ``executemany`` per table)."""
    from mlflow.store.tracking.dbmodels.models import (
        SqlAssessments,
        SqlSpan,
        SqlTraceInfo,
        SqlTraceMetadata,
        SqlTraceTag,
    )
    from sqlalchemy import insert

    models: tuple[Any, ...] = (SqlTraceInfo, SqlTraceTag, SqlTraceMetadata, SqlAssessments, SqlSpan)
    for name, model in zip(TABLES, models, strict=True):
        if table_rows.get(name):
            session.execute(insert(model.__table__), table_rows[name])
