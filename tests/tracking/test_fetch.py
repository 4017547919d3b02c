"""``rag_lab.tracking.fetch``: an MLflow run read back as the run folder ``rag-lab evaluate``
wrote; a missing required artifact or an absent store is a one-line ``ConfigError``."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from rag_lab.errors import ConfigError
from rag_lab.tracking.fetch import METRICS, PER_QUERY, download_run, resolve_tracking_uri


@pytest.fixture
def bare_run(tmp_path) -> tuple[str, str]:
    """A run with only ``metrics/metrics.json`` and no ``dataset_fingerprint`` tag."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("t", artifact_location=str(tmp_path / "artifacts"))
    run_id = client.create_run(exp).info.run_id
    src = tmp_path / "src" / "metrics.json"
    src.parent.mkdir()
    src.write_text(json.dumps({"ndcg_at_10": 0.5}))
    client.log_artifact(run_id, str(src), "metrics")
    return uri, run_id


def test_download_writes_what_was_logged(bare_run, tmp_path):
    uri, run_id = bare_run
    folder = download_run(run_id, uri, tmp_path / "run", required=(METRICS,))
    assert sorted(p.name for p in folder.iterdir()) == ["metrics.json", "mlflow_run_id"]
    assert json.loads((folder / "metrics.json").read_text()) == {"ndcg_at_10": 0.5}
    assert (folder / "mlflow_run_id").read_text() == run_id


def test_missing_required_artifact_and_store(bare_run, tmp_path):
    uri, run_id = bare_run
    with pytest.raises(ConfigError, match=f"MLflow run {run_id} has no {PER_QUERY} artifact"):
        download_run(run_id, uri, tmp_path / "a", required=(METRICS, PER_QUERY))
    with pytest.raises(ConfigError, match="no MLflow store"):
        download_run(run_id, f"sqlite:///{tmp_path / 'absent.db'}", tmp_path / "b")
    assert not (tmp_path / "absent.db").exists()


def test_tracking_uri_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("RAG_LAB_EXPERIMENTS", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert resolve_tracking_uri() == f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    assert resolve_tracking_uri() == "http://mlflow:5000"
    assert resolve_tracking_uri("sqlite:///x.db") == "sqlite:///x.db"
