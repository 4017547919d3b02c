"""Shared fixtures: the BEIR-layout toy dataset under ``tests/data/toy``."""

from __future__ import annotations

from pathlib import Path

import pytest

TOY = Path(__file__).parent / "data" / "toy"

# pyproject's `timeout` (300 s) is the limit for the default run; a model-heavy `slow` test (a real
# training run, a GGUF server, a benchmark-sized set) gets this much unless it sets its own.
SLOW_TIMEOUT_S = 1800


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


@pytest.fixture(scope="session")
def toy_path() -> Path:
    return TOY


@pytest.fixture(scope="session")
def toy_docs():
    """The toy corpus parsed with the strict BEIR record parser."""
    from rag_lab.parser import BeirCorpusParser
    from rag_lab.pipeline.corpus import parse_corpus

    return parse_corpus(BeirCorpusParser(), [TOY / "corpus.jsonl"], TOY)


@pytest.fixture(scope="session")
def toy_chunks(toy_docs):
    """One chunk per toy document (the BEIR setting)."""
    from rag_lab.chunker import NoneChunker

    return NoneChunker().chunk(toy_docs)


@pytest.fixture(scope="session")
def toy_queries():
    from rag_lab.dataset import read_queries

    return read_queries(TOY / "queries.jsonl")


# -- MLflow SQLite stores: the schema copied, not migrated ------------------------------------
# A fresh MLflow SQLite store runs MLflow's Alembic migrations (~2.5 s here), and the suite opens
# dozens of fresh stores. Once a test has imported MLflow's store code, a fresh store in this
# process gets the schema by SQLite's backup API from one store migrated the same way: the same
# tables and Alembic version, so the store then behaves as a migrated one. Other databases
# (PostgreSQL) and other processes (the CLI run as a subprocess) migrate as usual.
_SCHEMA: dict[str, object] = {}


def _copy_migrated_schema(engine) -> None:
    import sqlite3
    from contextlib import closing

    from sqlalchemy import create_engine

    migrate = _SCHEMA["migrate"]
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return migrate(engine)
    template = _SCHEMA.get("template")
    if template is None:
        template = Path(_SCHEMA["folder"]) / "schema.db"
        migrate(create_engine(f"sqlite:///{template}"))
        _SCHEMA["template"] = template
    raw = engine.raw_connection()
    try:
        with closing(sqlite3.connect(template)) as source:
            source.backup(raw.driver_connection)
    finally:
        raw.close()
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    import sys
    import tempfile

    db_utils = sys.modules.get("mlflow.store.db.utils")
    if db_utils is None or "migrate" in _SCHEMA:
        return
    _SCHEMA["migrate"] = db_utils._initialize_tables
    _SCHEMA["folder"] = tempfile.mkdtemp(prefix="rag_lab_mlflow_schema_")
    db_utils._initialize_tables = _copy_migrated_schema
