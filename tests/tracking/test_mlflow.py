"""rag_lab.tracking.mlflow: key sanitising, config flattening, and a logged run read back from a
sqlite store under tmp_path."""

from __future__ import annotations

import math

import pytest

from rag_lab.tracking import MlflowTracker, flatten, sanitize_key


@pytest.mark.parametrize(
    "key,expected",
    [
        ("ndcg@10", "ndcg_at_10"),
        ("evidence/recall@5", "evidence/recall_at_5"),
        ("retrievers.bm25.k1", "retrievers.bm25.k1"),
        ("a b-c:d", "a b-c:d"),
        ("dense(k=5)", "dense_k_5_"),
        ("by_category/口语/ndcg@10", "by_category/口语/ndcg_at_10"),  # MLflow takes Unicode
        ("a//b", "a/_/b"),  # a name MLflow would read as another path
        ("/a/../b", "_/a/_/b"),
    ],
)
def test_sanitize_key(key, expected):
    assert sanitize_key(key) == expected


def test_flatten_by_example():
    tree = {
        "retrievers": {"bm25": {"k1": 1.2, "b": 0.75}, "dense": {"embedder": {"dimension": 1024}}},
        "fusion": {"weights": {"dense": 0.7, "bm25": 0.3}},
        "metrics": ["ndcg@10", "recall@100"],
        "stages": [{"name": "a"}, {"name": "b", "opts": {}}],
        "empty": {},
        "none": None,
    }
    assert flatten(tree) == {
        "retrievers.bm25.k1": 1.2,
        "retrievers.bm25.b": 0.75,
        "retrievers.dense.embedder.dimension": 1024,
        "fusion.weights.dense": 0.7,
        "fusion.weights.bm25": 0.3,
        "metrics": ["ndcg@10", "recall@100"],  # a list of scalars stays one value
        "stages.0.name": "a",
        "stages.1.name": "b",
        "stages.1.opts": "{}",
        "empty": "{}",
        "none": None,
    }
    assert flatten({}) == {}
    assert flatten(3, "x") == {"x": 3}


@pytest.fixture
def restore_tracking_uri():
    import mlflow

    before = mlflow.get_tracking_uri()
    yield
    mlflow.set_tracking_uri(before)


def test_tracker_logs_a_run(tmp_path, restore_tracking_uri):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/store/m.db"
    artifacts = tmp_path / "artifacts"
    report = tmp_path / "per_query.csv"
    report.write_text("qid,ndcg@10\nq1,1.0\n", encoding="utf-8")
    tracker = MlflowTracker(
        uri=uri, experiment="unit", artifact_location=str(artifacts), tags={"suite": "tests"}
    )
    params = {
        "retrievers": {"bm25": {"k1": 1.2, "tokenizer": "english"}},
        "fusion": None,
        "long": "x" * 7000,
    }
    metrics = {"ndcg@10": 0.5, "recall@100": 1, "mrr@10": math.nan, "noise_ratio@5": math.inf}
    run_id = tracker.log_run(
        "trial-1",
        params,
        metrics,
        {"dataset": "toy"},
        {"reports": report, "": tmp_path / "missing.json"},
    )

    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(run_id)
    assert run.info.run_name == "trial-1"
    p = run.data.params
    assert p["retrievers.bm25.k1"] == "1.2" and p["retrievers.bm25.tokenizer"] == "english"
    assert p["fusion"] == "null"
    assert len(p["long"]) == 6000 and p["long"].endswith("...")
    assert run.data.metrics == {"ndcg_at_10": 0.5, "recall_at_100": 1.0}  # NaN and inf skipped
    assert run.data.tags["dataset"] == "toy" and run.data.tags["suite"] == "tests"
    listed = [f.path for f in client.list_artifacts(run_id, "reports")]
    assert listed == ["reports/per_query.csv"]
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.name == "unit"
    assert exp.artifact_location == artifacts.resolve().as_uri()
    assert (artifacts / run_id / "artifacts" / "reports" / "per_query.csv").exists()

    # a second run reuses the experiment
    run_id2 = tracker.log_run("trial-2", {}, {"ndcg@10": 0.25}, {}, {})
    assert client.get_run(run_id2).info.experiment_id == run.info.experiment_id
    assert run_id2 != run_id


def test_chinese_categories_and_colliding_names_keep_every_value(tmp_path, restore_tracking_uri):
    """Before: ``by_category/口语/...`` and ``by_category/安全/...`` both became
    ``by_category/__/...`` and one value was lost."""
    from mlflow.tracking import MlflowClient

    from rag_lab.metrics.names import logged_keys

    uri = f"sqlite:///{tmp_path}/m.db"
    metrics = {
        "by_category/口语/ndcg_at_10": 0.25,
        "by_category/安全/ndcg_at_10": 0.75,
        "hit_rate@5": 0.5,
        "hit_rate_at_5": 0.6,
    }  # the last two name one logged key
    run_id = MlflowTracker(uri=uri, experiment="unit").log_run(
        "zh", {"类别": "口语"}, metrics, {}, {}
    )
    logged = MlflowClient(tracking_uri=uri).get_run(run_id).data
    keys = logged_keys(metrics)
    assert logged.metrics["by_category/口语/ndcg_at_10"] == 0.25
    assert logged.metrics["by_category/安全/ndcg_at_10"] == 0.75
    assert len(set(keys.values())) == 4 and sorted(logged.metrics.values()) == [
        0.25,
        0.5,
        0.6,
        0.75,
    ]
    assert logged.metrics[keys["hit_rate_at_5"]] == 0.6 and logged.params["类别"] == "口语"


def test_batches_over_mlflow_limits_keep_everything(tmp_path, restore_tracking_uri):
    """One ``log_batch`` takes at most 1000 metrics, 100 params, 100 tags (1000 entities)."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/m.db"
    tracker = MlflowTracker(uri=uri, experiment="unit")
    run = tracker.start_run("big", {f"t{i}": str(i) for i in range(150)})
    run.log_params({f"p{i}": i for i in range(250)}, {f"u{i}": "x" for i in range(120)})
    run.log_metrics({f"m{i}": i / 7 for i in range(1500)})
    run.end("FINISHED")
    got = MlflowClient(uri).get_run(run.run_id)
    assert len(got.data.params) == 250 and len(got.data.metrics) == 1500
    assert {f"t{i}" for i in range(150)} | {f"u{i}" for i in range(120)} <= set(got.data.tags)
    assert got.data.metrics["m1499"] == pytest.approx(1499 / 7)
    assert got.info.status == "FINISHED"
    with pytest.raises(ValueError, match="run status 'DONE'"):
        run.end("DONE")
