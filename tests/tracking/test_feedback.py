"""Human feedback given on an evaluate run's traces (as MLflow's UI gives it: a HUMAN
assessment) read back by ``rag-lab judge --labels mlflow:<experiment>``: the same agreement and
PPI report as the same labels given as a file (issue 31 item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
from mlflow.entities import AssessmentSource

from rag_lab.cli.judge import run as judge
from rag_lab.evaluate import evaluate
from tests.compose import TOY_OVERRIDES, compose_evaluate


@pytest.fixture
def restore_tracking_uri():
    before = mlflow.get_tracking_uri()
    yield
    mlflow.set_tracking_uri(before)


def test_human_feedback_on_traces_are_the_judge_labels(tmp_path, restore_tracking_uri):
    cfg = compose_evaluate(
        [*TOY_OVERRIDES, "retrievers=[bm25]", "generator=extractive", "judge=lexical"], tmp_path
    )
    evaluate(cfg)
    run_dir = Path(cfg.paths.output_dir)
    uri = cfg.tracking.uri
    mlflow.set_tracking_uri(uri)
    exp = mlflow.get_experiment_by_name(cfg.tracking.experiment)
    traces = mlflow.search_traces(locations=[exp.experiment_id], return_type="list")
    by_query = {t.info.tags["query_id"]: t.info.trace_id for t in traces}
    answered = [json.loads(ln)["id"] for ln in (run_dir / "answers.jsonl").read_text().splitlines()]
    verdicts = {q: int(i % 3 != 0) for i, q in enumerate(sorted(answered)[:5])}
    person = AssessmentSource(source_type="HUMAN", source_id="alice@example.com")
    for qid, value in verdicts.items():
        if qid == sorted(verdicts)[0]:  # a first verdict the person corrects: the latest counts
            mlflow.log_feedback(
                trace_id=by_query[qid], name="faithful", value=not value, source=person
            )
        mlflow.log_feedback(
            trace_id=by_query[qid], name="faithful", value=bool(value), source=person
        )
    # not labels: a human note under another name, a judge's verdict
    first = by_query[sorted(verdicts)[0]]
    mlflow.log_feedback(trace_id=first, name="tone", value="ok", source=person)

    labels_file = tmp_path / "labels.jsonl"
    labels_file.write_text(
        "".join(json.dumps({"id": q, "faithful": v}) + "\n" for q, v in verdicts.items())
    )
    reports = {}
    for name, given in (("file", str(labels_file)), ("mlflow", f"mlflow:rag_lab@{uri}")):
        out = tmp_path / name / "scores.jsonl"
        assert judge(["--input", str(run_dir), "--out", str(out), "--labels", given]) == 0
        reports[name] = json.loads((tmp_path / name / "judge_labels.json").read_text())
    lex = reports["mlflow"]["judges"]["lexical"]
    assert lex["agreement"]["n"] == len(verdicts)
    assert reports["mlflow"]["judges"] == reports["file"]["judges"]


def test_no_feedback_is_one_line_exit_2(tmp_path, restore_tracking_uri, capsys):
    cfg = compose_evaluate(
        [*TOY_OVERRIDES, "retrievers=[bm25]", "generator=extractive", "judge=lexical"], tmp_path
    )
    evaluate(cfg)
    out = tmp_path / "j" / "scores.jsonl"
    given = f"mlflow:rag_lab@{cfg.tracking.uri}"
    assert judge(["--input", cfg.paths.output_dir, "--out", str(out), "--labels", given]) == 2
    assert "no human 'faithful' feedback" in capsys.readouterr().err
    missing = f"mlflow:nope@{cfg.tracking.uri}"
    assert judge(["--input", cfg.paths.output_dir, "--out", str(out), "--labels", missing]) == 2
    assert "no MLflow experiment 'nope'" in capsys.readouterr().err
