"""A new sqlite MLflow store starts as a copy of an empty one, migrated once per machine.

MLflow builds a new sqlite store by running its whole alembic history (~2.6 CPU-s, 13 s wall on a
loaded 2-core machine: more than a warm ``rag-lab evaluate`` spends on its stages). rag_lab does
that once per MLflow version into ``$RAG_LAB_HOME/mlflow/empty-<version>.db``, through MLflow's own
client, removes the default experiment from it (MLflow recreates it on open, with the artifact
location of the store it is in) and copies it where a store is wanted. MLflow still checks the
copy's schema revision when it opens it; any failure here leaves the store to MLflow as before.

That check compares the store's revision with the head of MLflow's migration scripts, which MLflow
finds by loading all of them (~70 files: ~0.1 CPU-s of every process that opens a store, each
worker of a multirun included). :func:`remember_schema_head` keeps that head per process and in
``$RAG_LAB_HOME/mlflow/schema-head.json``, keyed by the MLflow version and the name, size and
mtime of every migration script: the same check against the same head, without the loading.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import sqlite3
import tempfile
import uuid
from pathlib import Path

from rag_lab.io.atomic import write_atomic
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


_HEAD_PATCHED = "_rag_lab_remembers_the_schema_head"
HEAD_FILE = "schema-head.json"


def remember_schema_head() -> None:
    """Patch ``mlflow.store.db.utils._get_latest_schema_revision`` (idempotent; what
    ``_verify_schema`` asks when a SQL store opens): the head revision comes from this process's
    memo, else from ``HEAD_FILE`` when its key is the installed scripts', else from MLflow (then
    kept in both). A forked multirun worker inherits the memo."""
    try:
        from mlflow.store.db import utils
    except Exception:  # noqa: BLE001 - no SQL store support: nothing to remember
        return
    latest = utils._get_latest_schema_revision
    if getattr(latest, _HEAD_PATCHED, False):
        return
    memo: dict[str, str] = {}

    @functools.wraps(latest)
    def remembered() -> str:
        key = _scripts_key(utils)
        if key is None:  # a layout this does not know: MLflow's own lookup
            return str(latest())
        if key not in memo:
            memo[key] = _kept_head(key) or _keep_head(key, str(latest()))
        return memo[key]

    setattr(remembered, _HEAD_PATCHED, True)
    utils._get_latest_schema_revision = remembered


def _scripts_key(utils: object) -> str | None:
    """The MLflow version and each migration script's name, size and mtime (``None`` when the
    scripts are not where MLflow 3 keeps them)."""
    import mlflow

    try:
        versions = Path(utils._get_package_dir()) / "store" / "db_migrations" / "versions"  # type: ignore[attr-defined]
        files = sorted(
            (e.name, e.stat().st_size, e.stat().st_mtime_ns)
            for e in os.scandir(versions)
            if e.name.endswith(".py")
        )
    except (OSError, AttributeError):
        return None
    if not files:
        return None
    return json.dumps([mlflow.__version__, str(versions), files])


def _kept_head(key: str) -> str | None:
    try:
        kept = json.loads((home_dir() / "mlflow" / HEAD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    head = kept.get("head") if isinstance(kept, dict) and kept.get("key") == key else None
    return head if isinstance(head, str) and head else None


def _keep_head(key: str, head: str) -> str:
    try:
        path = home_dir() / "mlflow" / HEAD_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"key": key, "head": head}))
    except OSError as exc:  # read-only home: looked up again next time, nothing else lost
        log.debug("MLflow schema head not kept: %s", exc)
    return head
