"""Human feedback read back from MLflow: the assessments people gave on the traces of an
experiment (in MLflow's UI, with ``mlflow.log_feedback``, or through a server's feedback
endpoint), for ``rag-lab judge --labels mlflow:<experiment>`` and ``rag-lab traces to-dataset``.

:func:`traces_to_beir` (``rag-lab traces to-dataset``) turns an experiment's traces (evaluated or
served) into a query set in the BEIR layout: ``queries.jsonl`` (every traced query text once;
``metadata``: ``category``, ``trace_id``, ``run_id``, ``labelled``) and, for the queries a person
labelled, ``qrels/test.tsv`` from their human ``expected_document_ids`` assessment (a list of
document ids, grade 1 each, or ``{id: grade}``; MLflow's UI adds it as an expectation). The
queries nobody labelled stay in ``queries.jsonl`` for label-free evaluation
(``dataset.labels=false``: faithfulness, empty-result, conflict and fallback rates).

Only ``HUMAN`` assessments count (a judge's or rag_lab's own are not labels), only valid ones (an
assessment a later one overrides is not), the latest per trace and name.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
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

    exp_id = fetch_experiment(experiment, uri)  # first: a client would create a missing store
    client: Any = MlflowClient(uri)
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


LABEL = "expected_document_ids"


def query_text(request: Any) -> str | None:
    from rag_lab.tracking.scorers import QUERY_KEYS

    if isinstance(request, str):
        return request.strip() or None
    if isinstance(request, dict):
        for key in QUERY_KEYS:
            if isinstance(request.get(key), str) and request[key].strip():
                return str(request[key]).strip()
    return None


def _grades(value: Any) -> dict[str, int]:
    if isinstance(value, dict):
        return {str(k): int(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return {str(d): 1 for d in value}
    return {}


def traces_to_beir(experiment: str, uri: str, out: Path) -> dict[str, int]:
    """Write the BEIR query set of ``experiment``'s traces into ``out`` (module docstring);
    returns ``{"queries": n, "labelled": n, "skipped": n}`` (skipped: traces without a query
    text). A query text traced several times is one query (its labels merged, the highest grade
    kept); its id is the first trace's ``query_id`` tag when unique, else ``t<n>``."""
    import json

    texts: dict[str, dict[str, Any]] = {}
    skipped = 0
    for trace in experiment_traces(experiment, uri):
        text = query_text(trace.request)
        if text is None:
            skipped += 1
            continue
        entry = texts.setdefault(
            text,
            {
                "qid": trace.query_id,
                "category": trace.tags.get("category") or "",
                "trace_id": trace.trace_id,
                "run_id": trace.run_id,
                "grades": {},
            },
        )
        for doc, grade in _grades(trace.human.get(LABEL)).items():
            entry["grades"][doc] = max(grade, entry["grades"].get(doc, grade))
    if not texts:
        raise ConfigError(f"mlflow:{experiment}: no trace with a query text to write")
    used: set[str] = set()
    out.mkdir(parents=True, exist_ok=True)
    labelled = 0
    qrels_lines = ["query-id\tcorpus-id\tscore"]
    with (out / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for n, (text, e) in enumerate(texts.items(), 1):
            qid = e["qid"] if e["qid"] and e["qid"] not in used else f"t{n}"
            used.add(qid)
            meta = {
                "category": e["category"],
                "trace_id": e["trace_id"],
                "run_id": e["run_id"],
                "labelled": bool(e["grades"]),
            }
            fh.write(json.dumps({"_id": qid, "text": text, "metadata": meta}, ensure_ascii=False))
            fh.write("\n")
            if e["grades"]:
                labelled += 1
                qrels_lines += [f"{qid}\t{doc}\t{g}" for doc, g in sorted(e["grades"].items())]
    if labelled:
        (out / "qrels").mkdir(exist_ok=True)
        (out / "qrels" / "test.tsv").write_text("\n".join(qrels_lines) + "\n", encoding="utf-8")
    return {"queries": len(texts), "labelled": labelled, "skipped": skipped}


def evaluation_records(name: str, uri: str) -> list[dict[str, Any]]:
    """The records of the MLflow evaluation dataset ``name`` (``mlflow.genai.datasets``) at
    ``uri``: ``{"id", "inputs", "expectations"}`` each (``id``: the inputs' ``query_id`` when
    given, else MLflow's record id); ``ConfigError`` naming the dataset when it does not exist."""
    import mlflow
    from mlflow.exceptions import MlflowException

    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///") :]).is_file():
        raise ConfigError(f"no MLflow store at {uri}")
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)  # mlflow.genai.datasets reads the global tracking URI
    try:
        from mlflow.genai.datasets import get_dataset

        try:
            frame = get_dataset(name=name).to_df()
        except MlflowException as exc:
            raise ConfigError(
                f"MLflow evaluation dataset {name!r} not found in {uri} "
                f"({exc.message.splitlines()[0]})"
            ) from None
    finally:
        mlflow.set_tracking_uri(before)
    out = []
    for rec in frame.to_dict("records"):
        inputs = rec.get("inputs") if isinstance(rec.get("inputs"), dict) else {}
        qid = inputs.get("query_id") or rec.get("dataset_record_id")
        out.append(
            {"id": str(qid), "inputs": inputs, "expectations": dict(rec.get("expectations") or {})}
        )
    return out
