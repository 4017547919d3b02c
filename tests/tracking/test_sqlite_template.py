"""A new sqlite MLflow store is a copy of an empty one migrated once per machine: MLflow opens it
as its own (schema check, default experiment), nothing replaces an existing store, and any
failure leaves the store to MLflow."""

from __future__ import annotations

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
