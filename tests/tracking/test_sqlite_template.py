"""A new sqlite MLflow store is a copy of an empty one migrated once per machine: MLflow opens it
as its own (schema check, default experiment), nothing replaces an existing store, and any
failure leaves the store to MLflow."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from rag_lab.tracking import sqlite_template
from rag_lab.tracking.sqlite_template import seed


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("home")
        mp.setenv("RAG_LAB_HOME", str(path))
        yield path


def test_a_seeded_store_is_one_mlflow_opens_as_its_own(home, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    db = tmp_path / "exp" / "mlflow.db"
    assert seed(db) and db.is_file()
    templates = list((home / "mlflow").glob("empty-*.db"))
    assert len(templates) == 1
    with sqlite3.connect(templates[0]) as con:  # no default experiment carried from elsewhere
        assert con.execute("SELECT count(*) FROM experiments").fetchone() == (0,)
    con.close()
    client = MlflowClient(f"sqlite:///{db}")
    (default,) = client.search_experiments()
    assert default.name == "Default" and str(home) not in default.artifact_location
    exp = client.create_experiment("rag_lab")
    run = client.create_run(exp)
    client.log_metric(run.info.run_id, "ndcg_at_10", 0.5)
    assert client.get_run(run.info.run_id).data.metrics == {"ndcg_at_10": 0.5}

    # the template is built once: the next store is a copy, MLflow's migrations never run
    def no_build(*args, **kwargs):
        raise AssertionError("built again")

    monkeypatch.setattr("mlflow.tracking.MlflowClient", no_build)
    assert seed(tmp_path / "other" / "mlflow.db")
    assert not list(tmp_path.glob("**/.*.seed"))  # no temporary file left behind


def test_an_existing_store_is_never_replaced(home, tmp_path):
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"a store someone made")
    assert not seed(db)
    assert db.read_bytes() == b"a store someone made"


def test_parallel_seeds_make_one_store(home, tmp_path):
    db = tmp_path / "mlflow.db"
    seed(tmp_path / "warm.db")  # the template exists: the threads race on the copy only
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(seed(db))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 5 + [True]
    assert sqlite3.connect(db).execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)


def test_a_failure_leaves_the_store_to_mlflow(tmp_path, monkeypatch):
    blocked = tmp_path / "home"
    blocked.write_text("a file where the home folder should be")
    monkeypatch.setenv("RAG_LAB_HOME", str(blocked))
    db = tmp_path / "exp" / "mlflow.db"
    assert not seed(db) and not db.exists()
    monkeypatch.setattr(sqlite_template, "_template", lambda: Path("/nonexistent/empty.db"))
    assert not seed(db) and not db.exists() and not list(db.parent.glob(".*"))


def test_the_schema_head_is_mlflows_remembered_per_process_and_on_disk(home, monkeypatch):
    """``remember_schema_head``: the revision MLflow's schema check compares a store with is the
    one its migration scripts give, computed once (issue 36: ~0.1 CPU-s of every open), kept in
    ``$RAG_LAB_HOME/mlflow/schema-head.json`` under the scripts' key; a stale or damaged file is
    ignored and rewritten."""
    from mlflow.store.db import utils

    original = utils._get_latest_schema_revision
    truth = original()
    calls = []

    def counted():
        calls.append(1)
        return original()

    monkeypatch.setattr(utils, "_get_latest_schema_revision", counted)
    sqlite_template.remember_schema_head()
    sqlite_template.remember_schema_head()  # idempotent: wrapped once
    path = home / "mlflow" / sqlite_template.HEAD_FILE
    path.unlink(missing_ok=True)
    assert utils._get_latest_schema_revision() == truth and len(calls) == 1
    assert utils._get_latest_schema_revision() == truth and len(calls) == 1  # this process
    kept = json.loads(path.read_text())
    assert kept["head"] == truth and mlflow_version() in kept["key"]

    # a new process (a fresh memo) reads the file; a stale key or a damaged file: MLflow again
    for text, looked_up in (
        (json.dumps(kept), 0),
        (json.dumps({"key": "mlflow 0.0 scripts", "head": "bogus"}), 1),
        ("{not json", 1),
    ):
        monkeypatch.setattr(utils, "_get_latest_schema_revision", counted)
        path.write_text(text)
        calls.clear()
        sqlite_template.remember_schema_head()
        assert utils._get_latest_schema_revision() == truth
        assert len(calls) == looked_up
        assert json.loads(path.read_text())["head"] == truth


def test_a_store_opened_with_the_remembered_head_is_checked_against_it(home, tmp_path):
    """MLflow's own check still runs on open: a store whose revision is not the head refuses."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    sqlite_template.remember_schema_head()
    db = tmp_path / "mlflow.db"
    assert seed(db)
    MlflowClient(f"sqlite:///{db}").search_experiments()  # opens: the revisions agree
    with sqlite3.connect(db) as con:
        con.execute("UPDATE alembic_version SET version_num = 'an_old_revision'")
    con.close()
    from mlflow.tracking._tracking_service.registry import TrackingStoreRegistry

    TrackingStoreRegistry._get_store_with_resolved_uri.cache_clear()  # stores kept per URI
    with pytest.raises(MlflowException, match="out-of-date database schema|schema"):
        MlflowClient(f"sqlite:///{db}").search_experiments()


def mlflow_version() -> str:
    import mlflow

    return mlflow.__version__
