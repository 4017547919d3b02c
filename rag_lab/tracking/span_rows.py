"""The spans of traces just started in this transaction, written as MLflow 3.17's
``SqlAlchemyStore.log_spans`` writes them, in three statements instead of its per-trace work
(``rag_lab.tracking.mlflow._in_transactions`` calls :func:`write_spans`).

For spans of traces that ``start_trace`` created in the same transaction, and whose attributes
carry nothing ``log_spans`` reads beyond the span itself (token usage, cost, model, session,
user, trace-tag attributes, OTel resource attributes), MLflow's ``log_spans`` does exactly
this: a row per span in ``spans`` (the content is the span's dictionary after
``translate_span_when_storing``, JSON without ASCII escapes), a ``mlflow.trace.spansLocation``
= ``TRACKING_STORE`` tag per trace and the trace's ``db_payload_generation`` raised by one.
What it costs there is the rest: a multi-row ``INSERT ... ON CONFLICT`` compiled anew per 100
spans, an ``UPDATE`` and a ``merge`` (a ``SELECT``) per trace (~60% of the writing's CPU with
the trace infos in one flush). Anything else (another MLflow version, rollups enabled, another
database, a span with such attributes) is left to ``log_spans`` (:func:`write_spans` returns
``False``); ``tests/tracking/test_traces.py`` checks that every row of MLflow's trace tables is
the one ``log_spans`` writes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

# the versions whose log_spans this mirrors (read in their source: 3.18 adds to _log_spans_once a
# refusal of spans for another experiment's trace and streams the rows it re-reads; neither changes
# the rows written for traces just started in the run's own experiment); rag_lab.tracking.trace_rows
# mirrors their start_trace too under this gate (3.17.2's _start_trace_once differs from 3.18.0's
# only in 3.18 replacing NUL in the previews, which trace_rows.plain refuses, and in the path of a
# trace that exists already, which fresh ids never take)
MLFLOW_VERSIONS = ("3.17.", "3.18.")


# resource attributes log_spans does not copy into the trace's tags
SKIPPED = ("telemetry.sdk.", "mlflow.")


def _read_by_log_spans() -> tuple[str, ...]:
    """Span attributes whose value ``log_spans`` carries into the trace (usage, cost, model,
    session, user) or its tags: a span with any of them goes through ``log_spans`` itself."""
    from mlflow.tracing.constant import GenAiSemconvKey, SpanAttributeKey

    return (
        SpanAttributeKey.CHAT_USAGE,
        SpanAttributeKey.LLM_COST,
        SpanAttributeKey.MODEL,
        SpanAttributeKey.MODEL_PROVIDER,
        SpanAttributeKey.SESSION_ID,
        GenAiSemconvKey.CONVERSATION_ID,
        "user.id",
        SpanAttributeKey.TRACE_TAG_PREFIX,
    )


def applies(store: Any) -> bool:
    """Whether :func:`write_spans` may write for ``store`` (an MLflow version it mirrors, a
    sqlite ``SqlAlchemyStore``, rollups off)."""
    import mlflow

    if not mlflow.__version__.startswith(MLFLOW_VERSIONS):
        return False
    if type(store).__name__ != "SqlAlchemyStore" or getattr(store, "db_type", None) != "sqlite":
        return False
    from mlflow.store.tracking.utils.sql_trace_rollups import rollups_enabled

    return not rollups_enabled()


def finished(info: Any) -> bool:
    """Whether ``log_spans`` would leave ``info`` (a ``TraceInfo`` given to ``start_trace``) as
    it is: a final state and both previews (else it sets them from the root span)."""
    state = getattr(info.state, "value", info.state)
    return (
        state not in ("IN_PROGRESS", "STATE_UNSPECIFIED")
        and info.request_preview is not None
        and info.response_preview is not None
    )


def span_row(
    trace_id: str,
    exp: int,
    span_id: str,
    parent_id: str | None,
    name: str,
    span_type: str,
    status: str,
    start_ns: int,
    end_ns: int,
    content: str,
) -> dict[str, Any]:
    """One row of MLflow's ``spans`` table as ``log_spans`` writes it for a span without cost or
    model (``content``: the span's dictionary as JSON)."""
    return {
        "trace_id": trace_id,
        "experiment_id": exp,
        "span_id": span_id,
        "parent_span_id": parent_id,
        "name": name,
        "type": span_type,
        "status": status,
        "start_time_unix_nano": start_ns,
        "end_time_unix_nano": end_ns,
        "content": content,
        "input_cost": None,
        "output_cost": None,
        "total_cost": None,
        "model_name": None,
        "model_provider": None,
    }


def _plain(attributes: dict[str, Any], read: tuple[str, ...], skip: tuple[str, ...] = ()) -> bool:
    return not any(key.startswith(read) and not key.startswith(skip) for key in attributes)


def write_spans(session: Any, exp_id: str, spans: Sequence[Any]) -> bool:
    """Insert ``spans`` (MLflow ``Span`` entities of traces started in ``session``'s
    transaction, experiment ``exp_id``, each :func:`finished`) as ``log_spans`` would (module
    docstring); ``False``,
    with nothing written, where it would do more (the caller then calls it)."""
    from mlflow.store.tracking.dbmodels.models import SqlSpan, SqlTraceInfo, SqlTraceTag
    from mlflow.tracing.constant import SpansLocation, TraceTagKey
    from mlflow.tracing.otel.translation import translate_span_when_storing
    from mlflow.tracing.utils import TraceJSONEncoder
    from sqlalchemy import insert

    read = _read_by_log_spans()
    rows: list[dict[str, Any]] = []
    for span in spans:
        resource = getattr(span._span, "resource", None)
        if resource is not None and not _plain(dict(resource.attributes), ("",), SKIPPED):
            return False  # log_spans copies these resource attributes into the trace's tags
        content = translate_span_when_storing(span)
        if not _plain(content.get("attributes") or {}, read):
            return False
        rows.append(
            span_row(
                span.trace_id,
                int(exp_id),
                span.span_id,
                span.parent_id,
                span.name,
                span.span_type,
                span.status.status_code,
                span.start_time_ns,
                span.end_time_ns,
                json.dumps(content, cls=TraceJSONEncoder, ensure_ascii=False),
            )
        )
    if not rows:
        return True
    trace_ids = list(dict.fromkeys(row["trace_id"] for row in rows))
    session.execute(insert(SqlSpan.__table__), rows)
    location = {"key": TraceTagKey.SPANS_LOCATION, "value": SpansLocation.TRACKING_STORE.value}
    session.execute(
        insert(SqlTraceTag.__table__), [{"request_id": t, **location} for t in trace_ids]
    )
    bumped = (
        session.query(SqlTraceInfo)
        .filter(SqlTraceInfo.request_id.in_(trace_ids))
        .update(
            {SqlTraceInfo.db_payload_generation: SqlTraceInfo.db_payload_generation + 1},
            synchronize_session=False,
        )
    )
    if bumped != len(trace_ids):  # a trace not started here: undone with the transaction
        raise RuntimeError(f"spans of {len(trace_ids) - bumped} trace(s) not started here")
    return True
