"""Exports to serve: the production pipeline of the sample (hashing embedder, dev split: every
stage that flags something: metadata filter and rules on ``as_of``, conflicts, the fallback
chain with its standards corpus, extractive answers judged by the lexical judge)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.evaluate import evaluate
from rag_lab.export import export_pipeline
from tests.compose import compose_evaluate

PRODUCTION = [
    "experiment=production_rag",
    "embedder=hashing",
    "dataset.split=dev",
    "tracking=none",
]


@pytest.fixture(scope="session")
def production_export() -> Path:
    """The production export, built once per test session rather than once per xdist worker
    (test_http, test_mcp and test_server_process use it and often land on different workers;
    a build is an evaluate of the sample's dev split plus the export, ~5 CPU-s quiet): the first
    worker to need it builds it under a lock in the session's home (``RAG_LAB_TESTS_HOME``,
    tests/conftest.py), the others wait and take it. Serving only reads an export
    (rag_lab/export/load.py and rag_lab/server write nothing into it). A build that failed left
    no ``ready`` file, so the next worker builds again in a folder of its own."""
    import os

    from rag_lab.io.locks import exclusive

    shared = Path(os.environ["RAG_LAB_TESTS_HOME"]) / "production_export"
    shared.mkdir(exist_ok=True)
    ready = shared / "ready"
    with exclusive(shared):  # the project's build lock (.production_export.lock beside it)
        if not ready.is_file():
            tmp = shared / f"build-{os.getpid()}"
            tmp.mkdir()
            cfg = compose_evaluate(PRODUCTION, tmp)
            evaluate(cfg)
            ready.write_text(str(export_pipeline(Path(cfg.paths.output_dir), tmp / "export")))
        return Path(ready.read_text())
