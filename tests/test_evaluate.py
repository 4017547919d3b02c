"""``evaluate`` end to end on the toy dataset: outputs, MLflow run, hybrid, evidence metrics."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from rag_lab.evaluate import evaluate
from tests.compose import TOY_OVERRIDES, compose_evaluate


@pytest.fixture
def toy_cfg(tmp_path):
    """Compose the evaluate config on the toy dataset (hashing embedder: no model needed)."""

    def make(*extra: str):
        return compose_evaluate([*TOY_OVERRIDES, *extra], tmp_path)

    return make


REQUIRED = (
    [f"hit_rate_at_{k}" for k in (1, 5, 10)]
    + [f"recall_at_{k}" for k in (5, 10, 100)]
    + [f"precision_at_{k}" for k in (5, 10)]
    + [f"noise_ratio_at_{k}" for k in (5, 10)]
    + [
        "mrr_at_10",
        "ndcg_at_10",
        "map_at_100",
        "n_queries",
        "index_seconds",
        "query_p50_ms",
        "query_p95_ms",
        "embed_docs_per_second",
    ]
)


def mlflow_runs(uri: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("rag_lab")
    return client, client.search_runs([exp.experiment_id])


@pytest.mark.parametrize(
    "retrievers,fusion",
    [("[bm25]", "rrf"), ("[dense]", "rrf"), ("[dense,bm25]", "rrf"), ("[dense,bm25]", "weighted")],
)
def test_outputs_and_mlflow_run(toy_cfg, tmp_path, retrievers, fusion):
    cfg = toy_cfg(f"retrievers={retrievers}", f"fusion={fusion}")
    metrics = evaluate(cfg)
    out = Path(cfg.paths.output_dir)
    on_disk = json.loads((out / "metrics.json").read_text())
    for key in REQUIRED:
        assert key in on_disk, key
    assert on_disk["n_queries"] == 8 and on_disk["n_unanswerable"] == 1
    assert on_disk["ndcg_at_10"] == pytest.approx(metrics["ndcg_at_10"])
    # the toy set is easy for lexical matching: a broken pipeline scores far lower
    assert metrics["hit_rate_at_5"] >= 0.85
    assert metrics["noise_ratio_at_5"] == pytest.approx(
        pd.read_parquet(out / "per_query.parquet")["noise_ratio_at_5"].mean()
    )
    table = pd.read_parquet(out / "per_query.parquet")
    assert {
        "query_id",
        "text",
        "category",
        "ndcg_at_10",
        "retrieved_doc_ids",
        "retrieved_chunk_ids",
    } <= set(table)
    assert len(table) == 8
    unans = table[table.category == "unanswerable"].iloc[0]
    assert math.isnan(unans.ndcg_at_10)
    # whatever comes back for an unanswerable query is noise (stopwords like "the" match with jieba)
    assert len(unans.retrieved_chunk_ids) > 0 and unans.noise_ratio_at_5 == 1.0
    client, runs = mlflow_runs(cfg.tracking.uri)
    assert len(runs) == 1
    run = runs[0]
    # MLflow names: metrics.json's (rag_lab.tracking.evaluation.logged_metrics)
    assert run.data.metrics["ndcg_at_10"] == pytest.approx(metrics["ndcg_at_10"])
    assert run.data.tags["dataset_fingerprint"] and run.data.tags["dataset"] == "toy"
    assert run.data.params[
        "retrievers.bm25.k1" if "bm25" in retrievers else "retrievers.dense.index_type"
    ]
    arts = {a.path for a in client.list_artifacts(run.info.run_id)} | {
        a.path for d in ("tables", "ingest") for a in client.list_artifacts(run.info.run_id, d)
    }
    assert "config_resolved.yaml" in arts and "tables/per_query.parquet" in arts
    assert "ingest/ingest_report.json" in arts  # the ingest report and its totals
    assert run.data.metrics["ingest/n_files"] == 1.0


def test_evidence_level_metrics_from_answers(toy_cfg):
    metrics = evaluate(toy_cfg("retrievers=[bm25]"))
    assert 0 < metrics["evidence_hit_rate_at_5"] <= 1
    assert metrics["evidence_noise_ratio_at_1"] == pytest.approx(
        1 - metrics["evidence_precision_at_1"]
    )
    assert "by_category/exact_code/hit_rate_at_5" in metrics


def test_chunkers_score_on_the_same_labels(toy_cfg):
    """Document-level relevance does not depend on the chunker: tiny chunks still find the
    documents."""
    whole = evaluate(toy_cfg("retrievers=[bm25]", "chunker=none", "tracking=none"))
    small = evaluate(
        toy_cfg(
            "retrievers=[bm25]",
            "chunker=fixed_size",
            "chunker.size=40",
            "chunker.overlap=10",
            "tracking=none",
        )
    )
    assert small["n_chunks"] > whole["n_chunks"] == 8
    assert small["hit_rate_at_10"] >= 0.85 and whole["hit_rate_at_10"] >= 0.85


def test_tracking_none_writes_files_only(toy_cfg):
    cfg = toy_cfg("retrievers=[bm25]", "tracking=none")
    evaluate(cfg)
    assert (Path(cfg.paths.output_dir) / "metrics.json").exists()
    assert not Path(cfg.paths.experiments, "mlflow.db").exists()
