"""An export of a pipeline with a foreign component records how to rebuild it (import path,
arguments, package versions) and never pickles it; loading it rebuilds the component over the
exported chunks and ranks as the run did."""

from __future__ import annotations

import json

import pytest
import yaml

from rag_lab.errors import ConfigError
from rag_lab.export import export_pipeline, load_pipeline
from rag_lab.ranking import ranked

BM25 = [
    "retrievers=[langchain]",
    "retrievers.langchain.factory=langchain_community.retrievers.BM25Retriever.from_documents",
    "retrievers.langchain.embedder_argument=null",
    "chunker=langchain",
]


@pytest.fixture(scope="module")
def exported(sample_cache, tmp_path_factory):
    from omegaconf import open_dict

    from rag_lab.evaluate import evaluate
    from tests.compose import compose_evaluate

    tmp = tmp_path_factory.mktemp("adapter_export")
    cfg = compose_evaluate(
        ["tracking=none", "embedder=hashing", "evaluation.html_report=false", *BM25], tmp
    )
    with open_dict(cfg):
        cfg.cache.dir = str(sample_cache)
        cfg.evaluation.latency_queries = 0
    metrics = evaluate(cfg)
    return metrics, tmp / "run", export_pipeline(tmp / "run", tmp / "export")


def test_the_export_holds_a_rebuild_recipe_not_a_pickle(exported):
    metrics, _, export_dir = exported
    assert (
        metrics["hit_rate_at_5"] > 0.5
    )  # a real ranking of the sample (BM25 over 512-char chunks)
    files = {p.relative_to(export_dir).as_posix() for p in export_dir.rglob("*") if p.is_file()}
    assert "indexes/langchain/rebuild.json" in files
    assert not [f for f in files if f.endswith((".pkl", ".pickle", ".joblib"))]
    recipe = json.loads((export_dir / "indexes/langchain/rebuild.json").read_text())
    assert recipe["factory"] == "langchain_community.retrievers.BM25Retriever.from_documents"
    assert recipe["corpus_argument"] == "documents"
    assert set(recipe["packages"]) >= {"langchain-core", "langchain-community"}
    config = yaml.safe_load((export_dir / "pipeline.yaml").read_text())
    assert config["chunker"]["splitter"].endswith("RecursiveCharacterTextSplitter")
    versions = config["export"]["versions"]
    assert versions["langchain-core"] == recipe["packages"]["langchain-core"]
    assert versions["langchain-text-splitters"] != "not installed"


def test_loading_rebuilds_the_component_and_ranks_as_the_run(exported):
    import pandas as pd

    _, run_dir, export_dir = exported
    table = pd.read_parquet(run_dir / "per_query.parquet").head(20)
    loaded = load_pipeline(export_dir)
    got = loaded.run(dict(zip(table["query_id"], table["text"])))
    for qid, want in zip(table["query_id"], table["retrieved_chunk_ids"]):
        assert ranked(got[qid])[:10] == list(want)[:10]


def test_an_export_that_opts_a_package_in_is_refused_unless_trusted(exported, tmp_path):
    import shutil

    _, _, export_dir = exported
    copy = tmp_path / "export"
    shutil.copytree(export_dir, copy)
    path = copy / "pipeline.yaml"
    config = yaml.safe_load(path.read_text())
    config["retrievers"]["langchain"]["allow_imports"] = ["my_rag"]
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match="allow_imports"):
        load_pipeline(copy, verify=False)
