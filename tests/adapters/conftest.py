"""The sample dataset evaluated once per configuration, with one stage cache for the whole module
(parsing the sample's PDFs, scans and DOCX once)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import open_dict

from tests.compose import compose_evaluate

SAMPLE = ["tracking=none", "embedder=hashing", "evaluation.html_report=false"]


@pytest.fixture(scope="session")
def sample_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("adapters_cache")


@pytest.fixture
def run_sample(sample_cache: Path, tmp_path: Path):
    """``run_sample([overrides])`` → ``(metrics, run folder)`` on the sample's test split."""
    from rag_lab.evaluate import evaluate

    counter = iter(range(100))

    def run(overrides: list[str]) -> tuple[dict[str, float], Path]:
        out = tmp_path / f"run{next(counter)}"
        cfg = compose_evaluate([*SAMPLE, *overrides], out)
        with open_dict(cfg):
            cfg.cache.dir = str(sample_cache)
            cfg.evaluation.latency_queries = 2
        return evaluate(cfg), Path(cfg.paths.output_dir)

    return run


@pytest.fixture(scope="session")
def sample_chunks(sample_cache: Path):
    """The sample's corpus as the default evaluate config chunks it (recursive, 800 chars)."""
    from rag_lab.pipeline import build
    from tests.compose import compose_evaluate as compose

    cfg = compose([*SAMPLE, "retrievers=[bm25]"], sample_cache / "chunks_run")
    with open_dict(cfg):
        cfg.cache.dir = str(sample_cache)
    data = build.build_dataset(cfg).load()
    pipe = build.build_pipeline(cfg, data)
    chunks = pipe.load_corpus(
        data.corpus_sources, data.corpus_root, data.corpus_fingerprint, data.on_empty
    )
    return data, chunks
