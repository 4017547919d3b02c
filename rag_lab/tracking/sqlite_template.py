"""A new sqlite MLflow store starts as a copy of an empty one, migrated once per machine.

MLflow builds a new sqlite store by running its whole alembic history (~2.6 CPU-s, 13 s wall on a
loaded 2-core machine: more than a warm ``rag-lab evaluate`` spends on its stages). rag_lab does
that once per MLflow version into ``$RAG_LAB_HOME/mlflow/empty-<version>.db``, through MLflow's own
client, removes the default experiment from it (MLflow recreates it on open, with the artifact
location of the store it is in) and copies it where a store is wanted. MLflow still checks the
copy's schema revision when it opens it; any failure here leaves the store to MLflow as before.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
import uuid
from pathlib import Path

from rag_lab.paths import home_dir

log = logging.getLogger(__name__)


def seed(db: Path) -> bool:
    """Put an empty, migrated store at ``db`` unless a file is there; True when it did. Never
    replaces a store another process made meanwhile (a hard link, which fails on an existing
    name)."""
    if db.exists():
        return False
    try:
        template = _template()
        db.parent.mkdir(parents=True, exist_ok=True)
        tmp = db.with_name(f".{db.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.seed")
        try:  # made with the umask's mode, as MLflow's own file would be
            shutil.copyfile(template, tmp)
            try:
                os.link(tmp, db)
            except FileExistsError:
                return False
        finally:
            tmp.unlink(missing_ok=True)
    except Exception as exc:  # noqa: BLE001 - MLflow then builds the store itself, as before
        log.debug("no empty MLflow store copied to %s: %s", db, exc)
        return False
    return True


def _template() -> Path:
    import mlflow

    path = home_dir() / "mlflow" / f"empty-{mlflow.__version__}.db"
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        db = Path(tmp) / "empty.db"
        from mlflow.tracking import MlflowClient

        MlflowClient(f"sqlite:///{db}").search_experiments()  # MLflow creates and migrates it
        with sqlite3.connect(db) as con:
            con.execute("DELETE FROM experiment_tags WHERE experiment_id = 0")
            con.execute("DELETE FROM experiments WHERE experiment_id = 0")
        con.close()
        os.replace(db, path)  # atomic: a parallel builder's copy is as good as this one
    return path
