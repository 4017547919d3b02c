"""What an evaluate run looks like in MLflow (issue 14), read back from a real sqlite store under
tmp_path: Unicode keys kept, names that say what differs, a run open for the job's whole duration
and closed with its status, metrics grouped into ordered sections, the dataset as the run's input
and the per-query table."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

import rag_lab.pipeline.scoring as scoring_module
from rag_lab.errors import ConfigError
from rag_lab.evaluate import evaluate
from rag_lab.metrics.names import HEADLINE
from rag_lab.tracking.evaluation import (
    MAX_LOGGED,
    METRIC_GROUPS,
    child_run_name,
    metrics_json_name,
    mlflow_metric_names,
    single_run_name,
    swept_params,
)
from rag_lab.tracking.mlflow import MAX_KEY_LEN, RUNS_VIEW_TAG, mlflow_keys, runs_page_url
from tests.compose import TOY, TOY_OVERRIDES, compose_evaluate


@pytest.fixture
def restore_tracking_uri():
    import mlflow

    before = mlflow.get_tracking_uri()
    yield
    mlflow.set_tracking_uri(before)


# ------------------------------------------------------------------ keys: only what MLflow refuses


@pytest.mark.parametrize(
    "name",
    [
        "by_category/口语/ndcg_at_10",
        "by_category/安全/ndcg_at_10",
        "by_category/Sécurité/recall_at_5",
        "a b-c:d.e/f_g",
        "ndcg@10",
        "dense(k=5)",
        "a//b",
        "/a/../b",
        "x/",
        "by_category/" + "长" * 300 + "/ndcg_at_10",
    ],
)
def test_keys_pass_mlflow_validation_and_accepted_names_stay(name):
    from mlflow.exceptions import MlflowException
    from mlflow.utils.validation import _validate_metric_name, _validate_param_name

    key = mlflow_keys([name])[name]
    _validate_metric_name(key)  # raises MlflowException on a refused key
    _validate_param_name(key)
    assert len(key) <= MAX_KEY_LEN
    try:  # a name MLflow takes as it is must come back unchanged
        _validate_metric_name(name)
        accepted = len(name) <= MAX_KEY_LEN
    except MlflowException:
        accepted = False
    assert (key == name) == accepted, (name, key)


def test_long_and_colliding_names_stay_apart():
    long_a, long_b = "x/" + "a" * 300, "x/" + "a" * 299 + "b"
    keys = mlflow_keys([long_a, long_b, "hit_rate@5", "hit_rate_at_5"])
    assert len(set(keys.values())) == 4


# ------------------------------------------------------------------ metric groups


def test_metric_names_are_grouped_into_ordered_sections():
    names = mlflow_metric_names(
        [
            "ndcg_at_10",
            "evidence_hit_rate_at_5",
            "answer/faithfulness",
            "misses_at_5/demoted_by/fusion",
            "by_category/口语/ndcg_at_10",
            "query_p95_ms",
            "ingest/parse_seconds",
            "embed_docs_per_second",
            "cache/runs/hits",
            "cache_hits",
            "n_queries",
            "bm25/index_loaded",
        ]
    )
    assert names == {
        "ndcg_at_10": "1_quality/ndcg_at_10",
        "evidence_hit_rate_at_5": "1_quality/evidence_hit_rate_at_5",
        "answer/faithfulness": "1_quality/answer/faithfulness",
        "misses_at_5/demoted_by/fusion": "1_quality/misses_at_5/demoted_by/fusion",
        "by_category/口语/ndcg_at_10": "2_by_category/口语/ndcg_at_10",
        "query_p95_ms": "3_timing/query_p95_ms",
        "ingest/parse_seconds": "3_timing/ingest/parse_seconds",
        "embed_docs_per_second": "3_timing/embed_docs_per_second",
        "cache/runs/hits": "4_cache/runs/hits",
        "cache_hits": "4_cache/cache_hits",
        "n_queries": "5_counts/n_queries",
        "bm25/index_loaded": "5_counts/bm25/index_loaded",
    }
    # MLflow names a chart section by the key up to its last "/" and sorts sections by name
    sections = sorted({k.rsplit("/", 1)[0] for k in names.values()})
    firsts = [s.split("/")[0] for s in sections]
    assert firsts == sorted(firsts, key=lambda s: METRIC_GROUPS.index(s.split("_", 1)[1]))
    assert sections[0] == "1_quality"
    # read backwards (code that reads runs from MLflow): every name comes back
    assert {metrics_json_name(v): k for k, v in names.items()} == {k: k for k in names}
    assert metrics_json_name("best/ndcg_at_10") == "best/ndcg_at_10"  # not a grouped key
    assert metrics_json_name("ndcg_at_10") == "ndcg_at_10"  # a run logged before the groups


# ------------------------------------------------------------------ names


def test_single_run_name_says_what_the_configuration_is(tmp_path):
    def name(*overrides: str) -> str:
        return single_run_name(compose_evaluate([*TOY_OVERRIDES, *overrides], tmp_path))

    assert name("retrievers=[bm25]") == "toy/test bm25"
    assert name("retrievers=[bm25,dense]", "fusion=rrf") == "toy/test bm25+dense(hashing) rrf"
    assert (
        name("retrievers=[bm25,dense]", "fusion=weighted", "chunker=fixed_size", "chunker.size=40")
        == "toy/test bm25+dense(hashing) weighted fixed_size-40"
    )
    assert (
        name("retrievers=[bm25]", "query_transforms=[normalise]", "generator=extractive")
        == "toy/test bm25 qt:normalise gen:extractive"
    )
    sample = compose_evaluate(["dataset.split=dev"], tmp_path)
    assert single_run_name(sample) == (
        "maintenance_kb/dev bm25+dense(multilingual-e5-small) rrf recursive-800"
    )


def test_child_run_name_is_the_swept_overrides_unescaped():
    sweep = {
        "job": 3,
        "swept": ["fusion.k", "fusion.weights.dense"],
        "overrides": [
            r"tracking.uri=sqlite\:////tmp/x y/m.db",
            "dataset.split=dev",
            "fusion.k=37",
            "+fusion.weights.dense=0.1915194503788923",
        ],
    }
    assert child_run_name(sweep) == "fusion.k=37 fusion.weights.dense=0.1915"
    assert swept_params(sweep) == {"fusion.k": 37, "fusion.weights.dense": 0.1915194503788923}
    assert child_run_name({**sweep, "swept": []}) == "trial 3"


# ------------------------------------------------------------------ a run end to end


def chinese_toy(tmp_path: Path) -> Path:
    """The toy dataset with its categories renamed to two Chinese ones (unanswerable kept)."""
    data = tmp_path / "toy_zh"
    shutil.copytree(TOY, data)
    lines = []
    for i, line in enumerate((TOY / "queries.jsonl").read_text(encoding="utf-8").splitlines()):
        q = json.loads(line)
        if q["metadata"].get("category") != "unanswerable":
            q["metadata"]["category"] = "口语" if i % 2 else "安全"
        lines.append(json.dumps(q, ensure_ascii=False))
    (data / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return data


def the_run(cfg):
    client = MlflowClient(cfg.tracking.uri)
    exp = client.get_experiment_by_name(cfg.tracking.experiment)
    (run,) = client.search_runs([exp.experiment_id])
    return client, run


def test_a_run_in_mlflow(tmp_path, monkeypatch, restore_tracking_uri):
    """Chinese categories are two keys with their values; metrics grouped; the run open for the
    job's whole duration; the dataset an input with rag_lab's fingerprint; the table logged."""
    slow = 1.0  # work the run must include: scoring made slower by this many seconds
    score = scoring_module.score_split

    def slow_score(*args, **kwargs):
        time.sleep(slow)
        return score(*args, **kwargs)

    monkeypatch.setattr(scoring_module, "score_split", slow_score)
    data = chinese_toy(tmp_path)
    cfg = compose_evaluate(
        [*TOY_OVERRIDES, f"dataset.path={data}", "retrievers=[bm25]", "dataset.name=toy_zh"],
        tmp_path,
    )
    t0 = int(time.time() * 1000)
    metrics = evaluate(cfg)
    t1 = int(time.time() * 1000)
    client, run = the_run(cfg)
    logged = run.data.metrics

    assert run.info.status == "FINISHED" and run.info.run_name == "toy_zh/test bm25"
    # was: 140-370 ms (opened to log at the end); now the job's own duration
    assert slow * 1000 <= run.info.end_time - run.info.start_time <= t1 - t0
    # two Chinese categories: two keys, each with its own value (was: one key, a value lost)
    for cat in ("口语", "安全"):
        assert logged[f"by_category/{cat}/ndcg_at_10"] == pytest.approx(
            metrics[f"by_category/{cat}/ndcg_at_10"]
        )
    on_disk = json.loads((Path(cfg.paths.output_dir) / "metrics.json").read_text())
    assert "by_category/口语/ndcg_at_10" in on_disk  # metrics.json keeps its names
    finite = {k for k, v in on_disk.items() if isinstance(v, (int, float))}
    # was: every number (461 on the sample); now the headline under metrics.json names
    assert len(logged) <= MAX_LOGGED < len(finite)
    assert set(logged) <= finite
    assert set(HEADLINE) <= set(logged) and {"total_seconds", "n_queries"} <= set(logged)
    assert logged == pytest.approx({k: metrics[k] for k in logged})
    assert not any(k.startswith("evidence_") for k in logged)  # those are in the table
    # every number in the logged table tables/metrics.json, the logged ones marked
    arts = {a.path for a in client.list_artifacts(run.info.run_id, "tables")}
    assert "tables/metrics.json" in arts
    got = client.download_artifacts(run.info.run_id, "tables/metrics.json", tmp_path)
    doc = json.loads(Path(got).read_text())
    rows = {r[0]: (r[1], r[2]) for r in doc["data"]}
    assert set(rows) == finite
    assert {k for k, (_, is_logged) in rows.items() if is_logged} == set(logged)
    # the experiment opens on its runs in MLflow's UI
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    # and has rag_lab's saved view of its runs table: the headline columns first, best first
    view = json.loads(exp.tags[RUNS_VIEW_TAG])
    assert view["name"] == "rag_lab headline" and isinstance(view["createdAt"], int)
    state = json.loads(view["state"])
    heads = [f"metrics.`{h}`" for h in HEADLINE]
    assert state["selectedColumns"][: len(HEADLINE)] == heads
    assert state["columnOrder"][1 : 1 + len(HEADLINE)] == heads
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`ndcg_at_10`", False)
    assert set(HEADLINE) <= set(logged)  # each column has the run's value
    assert runs_page_url(cfg.tracking.uri, exp.experiment_id) is None  # sqlite: no server UI
    assert runs_page_url("http://h:5000/", "7") == (
        "http://h:5000/#/experiments/7/runs?workflowType=machine_learning&viewStateShareKey=rag_lab"
    )
    # the dataset as the run's input
    (given,) = run.inputs.dataset_inputs
    assert given.dataset.name == "toy_zh"
    assert given.dataset.digest == (Path(cfg.paths.output_dir) / "dataset_fingerprint").read_text()
    assert json.loads(given.dataset.source) == {"uri": str(data)}
    assert {t.key: t.value for t in given.tags}["mlflow.data.context"] == "test"
    assert json.loads(given.dataset.profile)["n_queries"] == metrics["n_queries"]
    # the per-query table, as an MLflow table (JSON, orient=split) beside the parquet file
    arts = {a.path for a in client.list_artifacts(run.info.run_id, "tables")}
    assert {"tables/per_query.json", "tables/per_query.parquet"} <= arts
    table = json.loads(
        Path(
            client.download_artifacts(run.info.run_id, "tables/per_query.json", tmp_path)
        ).read_text()
    )
    assert len(table["data"]) == metrics["n_queries"] and "ndcg_at_10" in table["columns"]
    ids = table["data"][0][table["columns"].index("retrieved_doc_ids")]
    assert isinstance(ids, str) and 0 < len(ids.split()) <= 10
    assert run.data.params["retrievers.bm25.k1"] == "1.5"
    assert (Path(cfg.paths.output_dir) / "mlflow_run_id").read_text() == run.info.run_id


def test_a_run_that_fails_mid_job_is_failed_with_its_finished_files(tmp_path, restore_tracking_uri):
    """A ConfigError raised after retrieval (the generator is built for the answer stage)."""
    cfg = compose_evaluate(
        [*TOY_OVERRIDES, "retrievers=[bm25]", "generator=extractive", "generator.max_sentences=0"],
        tmp_path,
    )
    with pytest.raises(ConfigError, match="generator"):
        evaluate(cfg)
    client, run = the_run(cfg)
    assert run.info.status == "FAILED" and run.info.end_time >= run.info.start_time
    assert run.data.tags["error"].startswith("ConfigError: cannot build generator")
    assert {a.path for a in client.list_artifacts(run.info.run_id)} >= {"config_resolved.yaml"}
    assert run.data.params["retrievers.bm25.k1"] == "1.5"  # logged when the run opened
    assert (Path(cfg.paths.output_dir) / "mlflow_run_id").read_text() == run.info.run_id
