"""Traces back to an evaluation set (issue 31 item 5): ``rag-lab traces to-dataset`` writes the
traced queries in the BEIR layout with qrels from human feedback; ``rag-lab evaluate`` scores the
labelled ones as the original run did and the rest label-free."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from mlflow.entities import AssessmentSource

from rag_lab.cli.traces import run as traces
from rag_lab.dataset.beir import read_qrels, read_queries
from rag_lab.errors import ConfigError
from rag_lab.evaluate import evaluate
from tests.compose import TOY, TOY_OVERRIDES, compose_evaluate


@pytest.fixture
def restore_tracking_uri():
    before = mlflow.get_tracking_uri()
    yield
    mlflow.set_tracking_uri(before)


def test_traces_to_dataset_and_back(tmp_path, restore_tracking_uri, capsys):
    base = [*TOY_OVERRIDES, "retrievers=[bm25]"]
    cfg = compose_evaluate(base, tmp_path / "first")
    evaluate(cfg)
    first = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet").set_index("query_id")
    uri = cfg.tracking.uri
    mlflow.set_tracking_uri(uri)
    exp = mlflow.get_experiment_by_name("rag_lab")
    found = mlflow.search_traces(locations=[exp.experiment_id], return_type="list")
    by_query = {t.info.tags["query_id"]: t.info.trace_id for t in found}
    toy_qrels = read_qrels(TOY / "qrels" / "test.tsv")
    labelled = [q for q in sorted(by_query) if any(g > 0 for g in toy_qrels[q].values())][:2]
    person = AssessmentSource(source_type="HUMAN", source_id="reviewer")
    for qid in labelled:  # a person names the relevant documents (MLflow's expectation)
        relevant = [d for d, g in toy_qrels[qid].items() if g > 0]
        mlflow.log_expectation(
            trace_id=by_query[qid], name="expected_document_ids", value=relevant, source=person
        )

    out = tmp_path / "from_traces"
    assert traces(["to-dataset", "--experiment", "rag_lab", "--out", str(out), "--uri", uri]) == 0
    assert f"{len(by_query)} queries ({len(labelled)} labelled" in capsys.readouterr().out
    queries = read_queries(out / "queries.jsonl")
    toy_queries = read_queries(TOY / "queries.jsonl")
    assert {q.text for q in queries.values()} == {toy_queries[q].text for q in by_query}
    assert {q for q, x in queries.items() if x.metadata["labelled"]} == set(labelled)
    assert all(x.metadata["trace_id"] == by_query[q] for q, x in queries.items())
    qrels = read_qrels(out / "qrels" / "test.tsv")
    assert qrels == {q: {d: 1 for d, g in toy_qrels[q].items() if g > 0} for q in labelled}

    # the labelled queries, evaluated against the traces' corpus: the first run's numbers
    corpus = [f"dataset.path={out}", f"dataset.corpus={TOY / 'corpus.jsonl'}"]
    again = compose_evaluate([*base, *corpus], tmp_path / "labelled")
    metrics = evaluate(again)
    assert metrics["n_queries"] == len(labelled)
    table = pd.read_parquet(Path(again.paths.output_dir) / "per_query.parquet")
    for _, row in table.iterrows():
        assert row["hit_rate_at_5"] == first.loc[row["query_id"], "hit_rate_at_5"]
        assert list(row["retrieved_doc_ids"]) == list(
            first.loc[row["query_id"], "retrieved_doc_ids"]
        )

    # label-free: every query, only what needs no labels
    free = compose_evaluate([*base, *corpus, "dataset.labels=false"], tmp_path / "free")
    metrics = evaluate(free)
    assert metrics["n_queries"] == len(by_query)
    assert metrics["empty_result_rate"] == pytest.approx(
        (first["retrieved_doc_ids"].map(len) == 0).mean()
    )
    assert not any(
        k.endswith(("ndcg_at_10", "hit_rate_at_5", "wrong_refusal_rate")) for k in metrics
    )
    on_disk = json.loads((Path(free.paths.output_dir) / "metrics.json").read_text())
    assert set(on_disk) == set(metrics)


def test_to_dataset_refuses_a_missing_experiment(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path}/none.db"
    assert traces(["to-dataset", "--experiment", "x", "--out", str(tmp_path), "--uri", uri]) == 2
    assert "no MLflow store" in capsys.readouterr().err


def test_an_mlflow_evaluation_dataset_is_a_dataset(tmp_path, restore_tracking_uri):
    """dataset=mlflow: the toy set as an MLflow evaluation dataset scores as the BEIR folder."""
    from mlflow.genai.datasets import create_dataset

    uri = f"sqlite:///{tmp_path}/eval.db"
    mlflow.set_tracking_uri(uri)
    exp = mlflow.create_experiment("app")
    queries, qrels = read_queries(TOY / "queries.jsonl"), read_qrels(TOY / "qrels" / "test.tsv")
    ds = create_dataset(name="toy_eval", experiment_id=exp)
    ds.merge_records(
        [
            {
                "inputs": {"question": queries[q].text, "query_id": q},
                "expectations": {"expected_document_ids": dict(qrels[q])},
            }
            for q in qrels
        ]
    )
    beir = evaluate(compose_evaluate([*TOY_OVERRIDES, "retrievers=[bm25]"], tmp_path / "beir"))
    overrides = [
        "dataset=mlflow",
        "dataset.name=toy_eval",
        f"dataset.corpus={TOY / 'corpus.jsonl'}",
        f"dataset.uri={uri}",
        "embedder=hashing",
        "tokenizer=jieba",
        "retrievers=[bm25]",
    ]
    got = evaluate(compose_evaluate(overrides, tmp_path / "mlflow"))
    for key in ("n_queries", "ndcg_at_10", "hit_rate_at_5", "recall_at_10", "noise_ratio_at_5"):
        assert got[key] == pytest.approx(beir[key]), key
    with pytest.raises(ConfigError, match="toy_missing"):
        evaluate(compose_evaluate([*overrides, "dataset.name=toy_missing"], tmp_path / "missing"))
