"""The shipped walk and experiments: the plan parses, its states compose as the experiments say,
and a bad walk file is one line naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rag_lab.analysis.walk import (
    Step,
    load_plan,
    missing_requirements,
    plan_from_dict,
    state_overrides,
)
from rag_lab.errors import ConfigError
from rag_lab.paths import CONFIG_DIR
from tests.compose import compose_evaluate

PLAN = Path(CONFIG_DIR) / "walk" / "tutorial_to_production.yaml"
# what a pipeline is made of, as composed: compared between the walk's end and production_rag
STAGES = (
    "contract",
    "chunker",
    "retrievers",
    "fusion",
    "postprocess",
    "context",
    "fallback",
    "generator",
    "judge",
)


def stages(cfg) -> dict:
    tree = OmegaConf.to_container(cfg, resolve=False)
    return {k: tree.get(k) for k in STAGES} | {"answer_k": tree["evaluation"]["answer_k"]}


def test_tutorial_rag_is_what_a_team_starts_from(tmp_path):
    cfg = compose_evaluate(["experiment=tutorial_rag"], tmp_path)
    assert cfg.get("contract") is None  # no metadata
    assert cfg.chunker._target_.endswith("FixedSizeChunker") and cfg.chunker.size == 512
    assert cfg.chunker.unit == "chars"
    assert list(cfg.retrievers) == ["dense"] and not cfg.get("postprocess")
    assert not cfg.get("context") and cfg.get("fallback") is None
    assert cfg.evaluation.answer_k == 3
    assert cfg.generator._target_.endswith("ExtractiveGenerator")
    assert cfg.judge._target_.endswith("LexicalJudge")


def test_langchain_tutorial_uses_the_adapters_over_the_same_embedder(tmp_path):
    native = compose_evaluate(["experiment=tutorial_rag"], tmp_path)
    cfg = compose_evaluate(["experiment=tutorial_rag_langchain"], tmp_path)
    assert cfg.chunker.splitter.endswith("RecursiveCharacterTextSplitter")
    assert cfg.chunker.kwargs.chunk_size == native.chunker.size
    assert cfg.chunker.kwargs.chunk_overlap == native.chunker.overlap
    assert list(cfg.retrievers) == ["langchain"]
    assert cfg.retrievers.langchain.embedder == native.retrievers.dense.embedder
    for key in ("generator", "judge", "context", "postprocess", "contract"):
        assert cfg.get(key) == native.get(key), key
    assert cfg.evaluation.answer_k == native.evaluation.answer_k


def test_the_walk_with_every_step_kept_is_production_rag(tmp_path):
    plan = load_plan(PLAN)
    # the entity path and the routed sources (instead of the chain) are tried by the walk but not
    # part of production_rag (docs/results/sample.md)
    tried = ("entity_path", "routed_sources")
    runnable = [s for s in plan.steps if not s.requires and s.name not in tried]
    assert [s.name for s in plan.steps if s.requires] == ["cross_encoder"]
    walked = compose_evaluate(list(state_overrides(plan, runnable)), tmp_path)
    production = compose_evaluate(["experiment=production_rag"], tmp_path)
    assert stages(walked) == stages(production)
    assert stages(compose_evaluate(list(state_overrides(plan, [])), tmp_path)) == stages(
        compose_evaluate(["experiment=tutorial_rag"], tmp_path)
    )


def test_the_cross_encoder_step_composes_with_a_model_path(tmp_path):
    plan = load_plan(PLAN)
    ce = next(s for s in plan.steps if s.name == "cross_encoder")
    extra = ["postprocess.cross_encoder.model=/models/reranker"]
    assert missing_requirements(ce, []) == ["postprocess.cross_encoder.model"]
    assert missing_requirements(ce, extra) == []
    cfg = compose_evaluate(list(state_overrides(plan, [ce], extra)), tmp_path)
    assert list(cfg.postprocess) == ["cross_encoder"]
    assert cfg.postprocess.cross_encoder.model == "/models/reranker"


def test_state_overrides_append_in_order_and_the_last_override_wins():
    plan = plan_from_dict(
        {
            "base": ["experiment=tutorial_rag", "fusion=rrf"],
            "lists": {"postprocess": [], "retrievers": ["dense"]},
            "steps": [{"name": "a", "overrides": ["fusion=routed"]}, {"name": "b"}],
        }
    )
    steps = [
        Step("x", append={"postprocess": ("rules",)}),
        Step("y", overrides=("fusion=routed",), append={"postprocess": ("conflicts", "rules")}),
        Step("z", append={"retrievers": ("bm25",)}),
    ]
    assert state_overrides(plan, steps, ["embedder=hashing", "fusion=weighted"]) == (
        "experiment=tutorial_rag",
        "postprocess=[rules,conflicts]",
        "retrievers=[dense,bm25]",
        "embedder=hashing",
        "fusion=weighted",
    )
    assert state_overrides(plan, []) == ("experiment=tutorial_rag", "fusion=rrf")


@pytest.mark.parametrize(
    "raw,needle",
    [
        ({"steps": [{"name": "a"}], "bogus": 1}, "unknown key(s) ['bogus']"),
        ({"steps": []}, "steps: expected a non-empty list"),
        ({"steps": [{"name": "a", "colour": "red"}]}, "steps[0]: unknown key(s) ['colour']"),
        ({"steps": [{"name": "a", "append": {"context": ["order"]}}]}, "steps[0].append.context"),
        ({"steps": [{"name": "a"}, {"name": "a"}]}, "names must be unique"),
        ({"steps": [{"name": "a b"}]}, "steps[0].name"),
        ({"steps": [{"name": "a"}], "select_split": "test"}, "must differ"),
        ({"steps": [{"name": "a", "overrides": "fusion=rrf"}]}, "steps[0].overrides"),
    ],
)
def test_bad_walk_is_one_line_naming_file_and_key(raw, needle):
    with pytest.raises(ConfigError) as err:
        plan_from_dict(raw, "conf/walk/x.yaml")
    message = str(err.value)
    assert message.startswith("conf/walk/x.yaml: ") and needle in message
    assert "\n" not in message


def test_bad_yaml_names_the_line(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("steps:\n  - name: a\n    overrides: [x\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"w\.yaml:\d+: not valid YAML"):
        load_plan(path)
