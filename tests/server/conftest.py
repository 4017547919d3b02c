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
def production_export(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("production")
    cfg = compose_evaluate(PRODUCTION, tmp)
    evaluate(cfg)
    return export_pipeline(Path(cfg.paths.output_dir), tmp / "export")
