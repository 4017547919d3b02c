"""Every pipeline ``evaluate`` runs exports: for each shipped experiment that runs offline, the
export re-scored on the run's split gives the run's metrics to 4 decimals (ranking, evidence,
miss reasons, conflict flags, refusals, fallback levels, answers and their judge).

The default run swaps in the hashing embedder (what the export must carry is the stages, not the
model's speed); the experiments as shipped (multilingual e5; SciFact and CMRC2018 where
``$RAG_LAB_DATA`` has them) are ``slow``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rag_lab.evaluate import evaluate
from rag_lab.export import evaluate_exported, export_pipeline
from tests.compose import compose_evaluate
from tests.export.roundtrip import assert_same_outputs

SAMPLE = ["sample_hashing", "stacked", "production_rag", "tutorial_rag", "tutorial_rag_langchain"]
SHARED = {  # experiment -> the folder under $RAG_LAB_DATA it reads
    "scifact_bm25": "scifact",
    "scifact_minilm": "scifact",
    "scifact_hybrid": "scifact",
    "cmrc2018_bm25_jieba": "cmrc2018",
}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    """One stage cache for the module: the sample's documents are parsed once."""
    return tmp_path_factory.mktemp("cache")


def round_trip(tmp_path: Path, overrides: list[str]) -> None:
    cfg = compose_evaluate([*overrides, "tracking=none"], tmp_path)
    metrics = evaluate(cfg)
    out = export_pipeline(Path(cfg.paths.output_dir), tmp_path / "export")
    again = evaluate_exported(out)
    assert_same_outputs(metrics, again)


@pytest.mark.parametrize("experiment", SAMPLE)
def test_a_sample_experiment_exports_and_rescores_the_same(experiment, tmp_path, cache_dir):
    round_trip(
        tmp_path,
        [
            f"experiment={experiment}",
            "embedder=hashing",
            "dataset.split=dev",
            f"cache.dir={cache_dir}",
        ],
    )


@pytest.mark.slow
@pytest.mark.parametrize("experiment", SAMPLE)
def test_a_sample_experiment_as_shipped(experiment, tmp_path):
    round_trip(tmp_path, [f"experiment={experiment}"])


@pytest.mark.slow
@pytest.mark.parametrize("experiment", sorted(SHARED))
def test_a_public_set_experiment_as_shipped(experiment, tmp_path):
    data = Path(os.environ.get("RAG_LAB_DATA", "../shared/data"))
    if not (data / SHARED[experiment]).is_dir():
        pytest.skip(f"{data / SHARED[experiment]} is not on this machine")
    round_trip(tmp_path, [f"experiment={experiment}", f"paths.data={data.resolve()}"])
