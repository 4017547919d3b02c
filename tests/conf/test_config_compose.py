"""Every config option composes and every ``_target_`` resolves; stage options instantiate."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.utils import get_object
from omegaconf import OmegaConf

from rag_lab.errors import ConfigError
from rag_lab.paths import CONFIG_DIR
from rag_lab.pipeline.build import build_parser, build_pipeline, check_targets, instantiate
from tests.compose import TOY, compose_evaluate

CONF = Path(CONFIG_DIR)
# conf/walk/ holds rag-lab walk plans, not an evaluate group (tested in tests/analysis/walk/)
SKIP = ("hydra", "local", "walk")
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir() and p.name not in SKIP)


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


ALL_OPTIONS = [(g, o) for g in GROUPS for o in options(g)]


def targets(node, where=""):
    if isinstance(node, dict):
        if "_target_" in node:
            yield where, node["_target_"]
        for k, v in node.items():
            yield from targets(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from targets(v, f"{where}[{i}]")


def test_groups_of_the_contract_exist():
    for group in (
        "dataset",
        "parser",
        "chunker",
        "embedder",
        "retrievers",
        "fusion",
        "reranker",
        "generator",
        "tracking",
    ):
        assert (CONF / group).is_dir(), group
    assert {"bm25", "dense"} <= set(options("retrievers"))
    assert {"beir", "sample"} <= set(options("dataset"))
    assert "minilm" in options("embedder") and "rrf" in options("fusion")


@pytest.mark.parametrize("group,option", ALL_OPTIONS, ids=[f"{g}={o}" for g, o in ALL_OPTIONS])
def test_option_composes_and_targets_resolve(group, option, tmp_path):
    value = f"[{option}]" if group == "retrievers" else option
    overrides = [f"{group}={value}"]
    if group != "dataset":
        overrides.append(f"dataset.path={TOY}")
    if group == "experiment" or group == "hparams_search":
        overrides = [f"{group}={option}"]
    cfg = compose_evaluate(overrides, tmp_path)
    tree = OmegaConf.to_container(cfg, resolve=False)
    found = list(targets(tree))
    assert found, "no _target_ in the composed config"
    for where, target in found:
        assert get_object(target) is not None, f"{where}: {target}"
    check_targets(tree)


@pytest.mark.parametrize("retrievers", ["[bm25]", "[dense]", "[dense,bm25]", "[bm25,dense]"])
def test_retrievers_multiselect_keys_by_name(retrievers, tmp_path):
    cfg = compose_evaluate([f"retrievers={retrievers}", f"dataset.path={TOY}"], tmp_path)
    assert sorted(cfg.retrievers) == sorted(retrievers.strip("[]").split(","))


def test_dataset_sets_stage_defaults_but_command_line_wins(tmp_path):
    cfg = compose_evaluate(["dataset=beir", f"dataset.path={TOY}"], tmp_path)
    assert cfg.chunker._target_.endswith("NoneChunker") and cfg.tokenizer._target_.endswith(
        "EnglishTokenizer"
    )
    cfg = compose_evaluate(
        ["dataset=beir", f"dataset.path={TOY}", "chunker=recursive", "tokenizer=jieba"], tmp_path
    )
    assert cfg.chunker._target_.endswith("RecursiveChunker") and cfg.tokenizer._target_.endswith(
        "JiebaTokenizer"
    )
    cfg = compose_evaluate([], tmp_path)  # the shipped sample: Markdown chunks, bilingual analysis
    assert cfg.chunker._target_.endswith("RecursiveChunker") and cfg.tokenizer._target_.endswith(
        "JiebaTokenizer"
    )


def test_top_level_tokenizer_and_embedder_flow_into_stages(tmp_path):
    cfg = compose_evaluate(
        [
            "dataset=beir",
            f"dataset.path={TOY}",
            "tokenizer=whitespace",
            "embedder=hashing",
            "retrievers=[dense,bm25]",
        ],
        tmp_path,
    )
    assert cfg.retrievers.bm25.tokenizer._target_.endswith("WhitespaceTokenizer")
    assert cfg.retrievers.dense.embedder._target_.endswith("HashingEmbedder")
    assert cfg.retrievers.dense.embedder.tokenizer._target_.endswith("WhitespaceTokenizer")


STAGE_GROUPS = ["parser", "chunker", "tokenizer", "fusion"]


@pytest.mark.parametrize("group,option", [(g, o) for g in STAGE_GROUPS for o in options(g)])
def test_stage_option_instantiates(group, option, tmp_path):
    cfg = compose_evaluate([f"{group}={option}", "dataset=beir", f"dataset.path={TOY}"], tmp_path)
    # the parser group also holds the corpus read's on_error policy (build_parser takes it off)
    obj = build_parser(cfg[group])[0] if group == "parser" else instantiate(cfg[group], group)
    assert type(obj).__name__ == cfg[group]._target_.rsplit(".", 1)[1]


def test_build_pipeline_hybrid_on_hashing(tmp_path):
    cfg = compose_evaluate(
        [
            "dataset=beir",
            f"dataset.path={TOY}",
            "embedder=hashing",
            "retrievers=[dense,bm25]",
            "fusion=weighted",
        ],
        tmp_path,
    )
    pipe = build_pipeline(cfg)
    assert set(pipe.retrievers) == {"dense", "bm25"}
    assert type(pipe.fusion).__name__ == "WeightedFusion"


def test_single_retriever_needs_no_fusion(tmp_path):
    cfg = compose_evaluate(["dataset=beir", f"dataset.path={TOY}", "retrievers=[bm25]"], tmp_path)
    assert build_pipeline(cfg).fusion is None


def test_disallowed_target_is_refused():
    with pytest.raises(ConfigError, match="os.system"):
        check_targets({"retrievers": {"bm25": {"_target_": "os.system", "command": "true"}}})
    with pytest.raises(ConfigError, match="not allowed"):
        instantiate(OmegaConf.create({"_target_": "subprocess.run", "args": ["true"]}), "x")


def test_target_walking_through_imports_is_refused(tmp_path):
    """An allowed-looking name that resolves to another package's callable (rag_lab.pipeline imports
    pathlib.Path) must not run: this one would write a file."""
    probe = tmp_path / "probe"
    node = {
        "_target_": "rag_lab.pipeline.Path.write_text",
        "_args_": [{"_target_": "rag_lab.pipeline.Path", "_args_": [str(probe)]}, "hello"],
    }
    with pytest.raises(ConfigError, match="not allowed"):
        instantiate(OmegaConf.create(node), "x")
    assert not probe.exists()
