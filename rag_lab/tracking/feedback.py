"""Human feedback read back from MLflow: the assessments people gave on the traces of an
experiment (in MLflow's UI, with ``mlflow.log_feedback``, or through a server's feedback
endpoint), for ``rag-lab judge --labels mlflow:<experiment>`` and ``rag-lab traces to-dataset``.

Only ``HUMAN`` assessments count (a judge's or rag_lab's own are not labels), only valid ones (an
assessment a later one overrides is not), the latest per trace and name.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rag_lab.errors import ConfigError

PAGE = 500


@dataclass(frozen=True)
class LoggedTrace:
    """A trace of the experiment as rag_lab reads it back: its ``query_id`` tag (None for a trace
    rag_lab did not write), the run it is linked to, the request text, its tags and every valid
    human assessment, ``{name: value}`` (the latest per name)."""

    trace_id: str
    query_id: str | None
    run_id: str | None
    request: Any
    tags: dict[str, str]
    human: dict[str, Any]


def _request(trace: Any) -> Any:
    preview = trace.info.request_preview
    try:
        import json

        return json.loads(preview) if preview else None
    except ValueError:
        return preview


def experiment_traces(experiment: str, uri: str) -> Iterator[LoggedTrace]:
    """Every trace of ``experiment`` at ``uri`` (spans not read: their root's output is, for the
    retrieved documents); ``ConfigError`` naming the experiment when it does not exist."""
    from mlflow.tracing.constant import TraceMetadataKey
    from mlflow.tracking import MlflowClient

    from rag_lab.tracking.mlflow import fetch_experiment

    client: Any = MlflowClient(uri)
    exp_id = fetch_experiment(experiment, uri)
    token = None
    while True:
        page = client.search_traces(
            locations=[exp_id], max_results=PAGE, page_token=token, include_spans=False
        )
        for trace in page:
            human: dict[str, tuple[int, Any]] = {}
            for a in trace.info.assessments or []:
                if a.source is None or a.source.source_type != "HUMAN" or a.valid is False:
                    continue
                value = a.feedback.value if a.feedback is not None else None
                if value is None and a.expectation is not None:
                    value = a.expectation.value
                when = int(a.create_time_ms or 0)
                if a.name not in human or human[a.name][0] <= when:
                    human[a.name] = (when, value)
            tags = dict(trace.info.tags)
            yield LoggedTrace(
                trace.info.trace_id,
                tags.get("query_id"),
                trace.info.trace_metadata.get(TraceMetadataKey.SOURCE_RUN),
                _request(trace),
                tags,
                {k: v for k, (_, v) in human.items()},
            )
        token = page.token
        if not token:
            return


def human_labels(
    experiment: str, uri: str, name: str = "faithful"
) -> list[tuple[LoggedTrace, Any]]:
    """``(trace, value)`` of every trace of ``experiment`` with a human ``name`` assessment."""
    return [(t, t.human[name]) for t in experiment_traces(experiment, uri) if name in t.human]


def split_spec(spec: str, default_uri: str) -> tuple[str, str]:
    """``mlflow:<experiment>[@<tracking uri>]`` → ``(experiment, uri)``."""
    body = spec.removeprefix("mlflow:")
    experiment, _, uri = body.partition("@")
    if not experiment:
        raise ConfigError(f"{spec}: expected mlflow:<experiment>[@<tracking uri>]")
    return experiment, uri or default_uri
