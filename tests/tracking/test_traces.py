"""A trace per evaluated query (issue 31): spans per stage with measured windows, retriever
documents, tags, the run link and assessments, read back from a real sqlite store with MLflow's
own ``search_traces``; checked against the run folder rag_lab wrote."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from rag_lab.errors import ConfigError
from rag_lab.evaluate import evaluate
from rag_lab.tracking.traces import MAX_TRACES, TRACE_DOCS, judge_source, selected
from tests.compose import TOY_OVERRIDES, compose_evaluate


@pytest.fixture
def restore_tracking_uri():
    before = mlflow.get_tracking_uri()
    yield
    mlflow.set_tracking_uri(before)


def test_selected_queries():
    ids = [f"q{i}" for i in range(MAX_TRACES + 5)]
    assert selected("all", ids) == ids[:MAX_TRACES]  # the documented cap
    assert selected("sample:3", ids) == ["q0", "q1", "q2"]
    assert selected("none", ids) == [] and selected(None, ids) == []
    assert selected("auto", ids) == ids[:MAX_TRACES] and selected("auto", ids, sweep=True) == []
    for bad in ("some", "sample:0", "sample:x", "sample"):
        with pytest.raises(ConfigError, match="tracking.traces"):
            selected(bad, ids)


def test_judge_source_names_the_judge_and_its_version():
    lexical = {"_target_": "rag_lab.judge.LexicalJudge", "threshold": 0.5}
    src = judge_source(lexical, "0.5.0")
    assert src is not None and src.startswith("lexical@0.5.0+")
    assert judge_source({**lexical, "threshold": 0.6}, "0.5.0") != src  # another setting
    assert judge_source({"_target_": "x.NLIJudge", "model": "org/nli-small"}, "1").startswith(
        "nli-small@1+"
    )
    assert judge_source(None, "0.5.0") is None


def _traces(cfg):
    client = MlflowClient(cfg.tracking.uri)
    exp = client.get_experiment_by_name(cfg.tracking.experiment)
    run_id = (Path(cfg.paths.output_dir) / "mlflow_run_id").read_text()
    mlflow.set_tracking_uri(cfg.tracking.uri)
    found = mlflow.search_traces(
        locations=[exp.experiment_id], run_id=run_id, return_type="list", max_results=1000
    )
    return client.get_run(run_id), {t.info.tags["query_id"]: t for t in found}


def test_a_trace_per_query_with_a_span_per_stage(tmp_path, restore_tracking_uri):
    cfg = compose_evaluate(
        [
            *TOY_OVERRIDES,
            "retrievers=[bm25,dense]",
            "fusion=rrf",
            "generator=extractive",
            "judge=lexical",
        ],
        tmp_path,
    )
    t0 = __import__("time").time_ns()
    metrics = evaluate(cfg)
    t1 = __import__("time").time_ns()
    run, traces = _traces(cfg)
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet").set_index("query_id")
    assert set(traces) == set(table.index) and len(traces) == metrics["n_queries"]
    assert run.data.tags["traces"] == str(len(traces))
    for qid, trace in traces.items():
        row = table.loc[qid]
        assert trace.info.tags["category"] == row["category"] and trace.info.tags["split"] == "test"
        assert trace.info.trace_metadata["mlflow.sourceRun"] == run.info.run_id
        spans = {s.name: s for s in trace.data.spans}
        assert list(spans) == [
            "rag_lab query",
            "bm25",
            "dense",
            "fusion",
            "context",
            "generation",
            "judge",
        ]
        root = spans["rag_lab query"]
        # the final ranking, as the run folder has it
        assert root.outputs["documents"] == list(row["retrieved_doc_ids"][:TRACE_DOCS])
        for name in ("bm25", "dense"):
            docs = spans[name].outputs
            assert spans[name].span_type == "RETRIEVER" and 0 < len(docs) <= TRACE_DOCS
            scores = [d["metadata"]["score"] for d in docs]
            assert scores == sorted(scores, reverse=True)
            assert all(d["metadata"]["doc_uri"] and d["id"] for d in docs)
            # read back in the order written: MLflow's trace view shows a document's first
            # metadata entry beside its text, so the ids lead (tests/tracking/test_mlflow_ui.py)
            assert all(
                list(d["metadata"])[:4] == ["doc_uri", "chunk_id", "rank", "score"] for d in docs
            )
            assert [d["metadata"]["rank"] for d in docs] == list(range(1, len(docs) + 1))
            assert spans[name].attributes["rag_lab.batch_queries"] == len(traces)
        # measured windows, inside the job, in pipeline order
        for s in trace.data.spans:
            assert t0 <= s.start_time_ns <= s.end_time_ns <= t1
        assert spans["bm25"].end_time_ns <= spans["dense"].start_time_ns
        assert spans["generation"].end_time_ns <= spans["judge"].start_time_ns
        assert spans["generation"].outputs == row["answer_response"]
        # assessments: retrieval outcomes (answerable queries) and the judge's verdict
        got = {a.name: a for a in trace.info.assessments}
        if row["category"] != "unanswerable":
            assert got["hit_at_5"].value == bool(row["hit_rate_at_5"] == 1.0)
            rank = got["first_relevant_rank"].value
            assert (0 < rank <= 5) == got["hit_at_5"].value
            assert got["hit_at_5"].source.source_id.startswith("rag_lab.metrics@")
        else:
            assert "hit_at_5" not in got
        if row["answer_faithfulness"] == row["answer_faithfulness"]:  # not NaN
            assert got["faithfulness"].value == pytest.approx(row["answer_faithfulness"])
            assert got["faithfulness"].source.source_type == "LLM_JUDGE"
            assert got["faithfulness"].source.source_id.startswith("lexical@")


def test_traces_none_and_sample(tmp_path, restore_tracking_uri):
    cfg = compose_evaluate(
        [*TOY_OVERRIDES, "retrievers=[bm25]", "tracking.traces=sample:2"], tmp_path
    )
    evaluate(cfg)
    _, traces = _traces(cfg)
    assert len(traces) == 2
    assert [s.name for s in next(iter(traces.values())).data.spans] == ["rag_lab query", "bm25"]
    cfg = compose_evaluate([*TOY_OVERRIDES, "retrievers=[bm25]", "tracking.traces=none"], tmp_path)
    evaluate(cfg)
    run, traces = _traces(cfg)
    assert traces == {} and "traces" not in run.data.tags
    bad = compose_evaluate([*TOY_OVERRIDES, "tracking.traces=most"], tmp_path)
    with pytest.raises(ConfigError, match="tracking.traces=most"):
        evaluate(bad)


def _stored(traces: dict) -> dict:
    """What the store holds of each trace, without what differs between two runs (ids, times)."""
    out = {}
    for qid, t in traces.items():
        meta = {k: v for k, v in t.info.trace_metadata.items() if k != "mlflow.sourceRun"}
        out[qid] = {
            "tags": {k: v for k, v in t.info.tags.items() if not k.startswith("mlflow.artifact")},
            "metadata": meta,
            "state": str(t.info.state),
            "previews": (t.info.request_preview, t.info.response_preview),
            "assessments": sorted(
                (a.name, a.value, a.source.source_type, a.source.source_id)
                for a in t.info.assessments
            ),
            "spans": [
                (
                    s.name,
                    s.span_type,
                    s.parent_id is None,
                    s.inputs,
                    s.outputs,
                    {  # measured latencies differ from run to run
                        k: v
                        for k, v in s.attributes.items()
                        if k not in ("mlflow.traceRequestId", "rag_lab.latency_ms")
                    },
                )
                for s in t.data.spans
            ],
        }
    return out


def test_transactions_store_what_the_public_calls_store(
    tmp_path, restore_tracking_uri, monkeypatch
):
    """On sqlite the traces go a few to a transaction through the store's own per-trace code
    (rag_lab.tracking.mlflow._in_transactions); the traces stored are those the public
    start_trace / log_spans calls store, one by one."""
    from rag_lab.tracking import mlflow as tracking

    overrides = [*TOY_OVERRIDES, "retrievers=[bm25,dense]", "generator=extractive"]
    overrides.append("judge=lexical")
    monkeypatch.setattr(tracking, "TRACES_PER_TRANSACTION", 2)  # several transactions
    batched = compose_evaluate(overrides, tmp_path / "batched")
    evaluate(batched)
    run, fast = _traces(batched)
    assert float(run.data.tags["trace_cpu_seconds"]) > 0
    monkeypatch.setattr(tracking, "_in_transactions", lambda *a, **k: None)
    public = compose_evaluate(overrides, tmp_path / "public")
    evaluate(public)
    _, slow = _traces(public)
    got, want = _stored(fast), _stored(slow)
    assert len(fast) > 2 and sorted(got) == sorted(want)
    for qid in got:
        for part in want[qid]:
            assert got[qid][part] == want[qid][part], (qid, part)
    for t in fast.values():
        assert t.info.trace_metadata["mlflow.sourceRun"] == run.info.run_id


TRACE_TABLES = (
    "trace_info",
    "trace_tags",
    "trace_request_metadata",
    "assessments",
    "spans",
    "span_metrics",
    "trace_metrics",
    "entity_associations",
)


def _rows(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    public: bool,
    attributes: dict | None = None,
    spans_written: list | None = None,
) -> dict:
    """Three hand-made traces written by ``MlflowRun.log_traces`` into a fresh sqlite store
    (through the transactions, or ``public``: MLflow's start_trace / log_spans one by one), the
    ids drawn in the same order on both paths; every row of MLflow's trace tables, without what
    is this store's own (its folder, the run id, the assessments' ids and creation times).
    ``attributes``: on the fusion span; ``spans_written`` collects, per transaction, ``"rows"``
    where the whole traces went as rows (``trace_rows.write``), else what
    ``span_rows.write_spans`` returned. The tables compared: :data:`TRACE_TABLES` and every other
    table of the store with a trace's id or named for traces, spans or assessments (the rollups
    and their queue: empty on both paths with rollups off)."""
    import random
    import secrets
    import sqlite3

    from rag_lab.tracking import mlflow as tracking
    from rag_lab.tracking import span_rows, trace_rows
    from rag_lab.tracking.traces import AssessmentRecord, SpanRecord, TraceRecord

    t = 1_700_000_000_000_000_000
    docs = [
        {"id": "c1", "page_content": "扭矩 torque 12 Nm", "metadata": {"doc_uri": "d1", "rank": 1}}
    ]
    records = [
        TraceRecord(
            f"q{i}",
            {"query_id": f"q{i}", "category": "numeric", "split": "test"},
            (
                SpanRecord(
                    "rag_lab query",
                    "CHAIN",
                    t,
                    t + 9_000_000,
                    {"query": "q"},
                    {"documents": ["d1"]},
                ),
                SpanRecord(
                    "bm25",
                    "RETRIEVER",
                    t,
                    t + 4_000_000,
                    {"query": "q"},
                    docs,
                    {"rag_lab.batch_queries": 3},
                ),
                SpanRecord(
                    "fusion",
                    "CHAIN",
                    t + 5_000_000,
                    t + 9_000_000,
                    {"n_candidates": 1},
                    [{"id": "c1", "score": 0.5}],
                    attributes or {},
                ),
            ),
            (
                AssessmentRecord("hit_at_5", i % 2 == 0, "CODE", "rag_lab.metrics@0"),
                AssessmentRecord("faithfulness", 0.25 * i, "LLM_JUDGE", "lexical@0+ab"),
            ),
        )
        for i in range(3)
    ]
    folder = tmp_path / ("public" if public else "batched")
    run = tracking.MlflowTracker(uri=f"sqlite:///{folder}/mlflow.db", experiment="t").start_run("r")
    draws = random.Random(7)  # the same ids on both paths (one draw per log_traces)
    monkeypatch.setattr(secrets, "token_bytes", lambda n=32: draws.randbytes(n))
    monkeypatch.setattr(tracking, "TRACES_PER_TRANSACTION", 2)  # several transactions
    if public:
        monkeypatch.setattr(tracking, "_in_transactions", lambda *a, **k: None)
    if spans_written is not None:
        write = span_rows.write_spans
        monkeypatch.setattr(
            span_rows,
            "write_spans",
            lambda *a: spans_written.append(write(*a)) or spans_written[-1],
        )
        write_rows = trace_rows.write
        monkeypatch.setattr(
            trace_rows, "write", lambda *a: spans_written.append("rows") or write_rows(*a)
        )
    assert len(run.log_traces(records)) == 3
    monkeypatch.undo()
    own = ("assessment_id", "created_timestamp", "last_updated_timestamp")
    out = {}
    with sqlite3.connect(folder / "mlflow.db") as db:
        tables = list(TRACE_TABLES)
        for (name,) in db.execute("select name from sqlite_master where type = 'table'"):
            cols = {c[1] for c in db.execute(f"pragma table_info({name})")}
            named = any(w in name for w in ("trace", "span", "assessment"))
            if (named or cols & {"request_id", "trace_id"}) and name not in tables:
                tables.append(name)
        for table in tables:
            cols = [c[1] for c in db.execute(f"pragma table_info({table})")]
            keep = [i for i, c in enumerate(cols) if c not in own]
            rows = db.execute(f"select * from {table}").fetchall()
            out[table] = sorted(
                tuple(
                    str(r[i]).replace(run.run_id, "RUN").replace(str(folder), "DIR") for i in keep
                )
                for r in rows
            )
    return out


@pytest.mark.parametrize(
    ("attributes", "version", "paths"),
    [
        ({}, None, ["rows"] * 2),  # whole traces as rows (rag_lab.tracking.trace_rows)
        # an attribute not rag_lab's own: MLflow's start_trace, the spans as rows (span_rows)
        ({"custom.note": "x"}, None, [True] * 2),
        # one log_spans reads: MLflow's start_trace and log_spans
        ({"mlflow.chat.tokenUsage": {"input_tokens": 3}}, None, [False] * 2),
        ({}, "3.99.0", []),  # an MLflow whose code these rows have not read: its own calls
    ],
)
def test_transactions_write_the_rows_the_public_calls_write(
    tmp_path, monkeypatch, attributes, version, paths
):
    """The rows paths (whole traces as rows where trace_rows applies; else one flush for all of
    a transaction's trace infos and the spans as rows where span_rows applies, else MLflow's
    log_spans) leave exactly the rows of MLflow's own start_trace / log_spans in every trace
    table: the same trace infos, tags, metadata, assessments and span contents."""
    if version is not None:
        monkeypatch.setattr(mlflow, "__version__", version)
    written: list = []
    batched = _rows(tmp_path / "a", monkeypatch, False, attributes, written)
    if version is not None:
        monkeypatch.setattr(mlflow, "__version__", version)
    public = _rows(tmp_path / "b", monkeypatch, True, attributes)
    assert len(batched["trace_info"]) == 3 and len(batched["spans"]) == 9
    assert len(batched["assessments"]) == 6
    if not _rows_apply(version):  # an installed MLflow the rows have not read: its own calls
        paths = []
    assert written == paths
    assert set(batched) == set(public) and set(TRACE_TABLES) <= set(batched)
    for table in batched:
        assert batched[table] == public[table], table


def _rows_apply(version: str | None = None) -> bool:
    """Whether span_rows writes the spans under MLflow ``version`` (``None``: the installed one)."""
    from rag_lab.tracking.span_rows import MLFLOW_VERSIONS

    return (version or mlflow.__version__).startswith(MLFLOW_VERSIONS)


def test_a_store_failing_mid_way_costs_the_traces_not_the_run(
    tmp_path, restore_tracking_uri, monkeypatch, caplog
):
    """The store breaks off in the second transaction of traces: the run still ends FINISHED
    with its metrics, a warning says so and the run is tagged traces_error; the first
    transaction's traces are whole (every span), the failed one left nothing. The write
    breaks: the traces' rows (trace_rows) where the installed MLflow is one the rows mirror,
    else MLflow's own ``_log_spans_once``."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from sqlalchemy.exc import OperationalError

    from rag_lab.tracking import mlflow as tracking
    from rag_lab.tracking import trace_rows

    owner, name = (trace_rows, "write") if _rows_apply() else (SqlAlchemyStore, "_log_spans_once")
    write, calls = getattr(owner, name), []

    def breaks(*args):
        calls.append(1)
        if len(calls) == 2:
            raise OperationalError("INSERT INTO spans", {}, Exception("disk I/O error"))
        return write(*args)

    monkeypatch.setattr(owner, name, breaks)
    monkeypatch.setattr(tracking, "TRACES_PER_TRANSACTION", 2)
    cfg = compose_evaluate([*TOY_OVERRIDES, "retrievers=[bm25,dense]"], tmp_path)
    with caplog.at_level("WARNING"):
        metrics = evaluate(cfg)
    run, traces = _traces(cfg)
    assert run.info.status == "FINISHED" and run.data.metrics["ndcg_at_10"] == pytest.approx(
        metrics["ndcg_at_10"]
    )
    assert "disk I/O error" in run.data.tags["traces_error"] and "traces" not in run.data.tags
    assert "MLflow traces not all written" in caplog.text
    assert len(traces) == 2 and all(len(t.data.spans) == 4 for t in traces.values())


def test_spans_go_as_rows_only_for_traces_log_spans_would_not_update():
    """A trace still in progress, or without a preview, gets its state or preview from
    log_spans' root span: its spans go through log_spans, not as rows."""
    from types import SimpleNamespace

    from mlflow.entities import TraceState

    from rag_lab.tracking.span_rows import finished

    def info(state, request="{}", response="{}"):
        return SimpleNamespace(state=state, request_preview=request, response_preview=response)

    assert finished(info(TraceState.OK)) and finished(info(TraceState.ERROR))
    assert not finished(info(TraceState.IN_PROGRESS))
    assert not finished(info(TraceState.STATE_UNSPECIFIED))
    assert not finished(info(TraceState.OK, request=None))
    assert not finished(info(TraceState.OK, response=None))
