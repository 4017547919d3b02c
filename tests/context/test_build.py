"""The ``context`` group: every option builds through ``build_context_stages``, in order; the LLM
distiller without an LLM generator is a one-line config error."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rag_lab.context import ContextStage
from rag_lab.errors import ConfigError
from rag_lab.paths import CONFIG_DIR
from rag_lab.pipeline import build
from tests.compose import TOY_OVERRIDES, compose_evaluate

OPTIONS = sorted(p.stem for p in (Path(CONFIG_DIR) / "context").glob("*.yaml"))


def test_default_is_no_stage(tmp_path):
    assert build.build_context_stages(compose_evaluate(TOY_OVERRIDES, tmp_path)) == {}


def test_model_free_options_build_in_the_given_order(tmp_path):
    free = [o for o in OPTIONS if o != "llm_distill"]
    cfg = compose_evaluate([*TOY_OVERRIDES, f"context=[{','.join(reversed(free))}]"], tmp_path)
    stages = build.build_context_stages(cfg)
    assert list(stages) == list(reversed(free))
    assert all(isinstance(s, ContextStage) for s in stages.values())


def test_llm_distill_builds_with_an_llm_generator_only(tmp_path):
    with pytest.raises(ConfigError, match="context.llm_distill.generator"):
        build.build_context_stages(
            compose_evaluate([*TOY_OVERRIDES, "context=[llm_distill]"], tmp_path)
        )
    cfg = compose_evaluate(
        [*TOY_OVERRIDES, "context=[llm_distill]", "generator=openai", "generator.model=m"],
        tmp_path,
    )
    assert type(build.build_context_stages(cfg)["llm_distill"]).__name__ == "LLMDistiller"


def test_llm_distill_shares_the_runs_generator(tmp_path):
    """Given the built generator, the stage uses that object (a local model loads once)."""
    cfg = compose_evaluate(
        [*TOY_OVERRIDES, "context=[llm_distill]", "generator=openai", "generator.model=m"],
        tmp_path,
    )
    gen = build.build_generator(cfg)
    assert build.build_context_stages(cfg, gen)["llm_distill"].generator is gen
    assert build.build_context_stages(cfg)["llm_distill"].generator is not gen
    # a stage given its own generator keeps it
    own_cfg = OmegaConf.to_container(cfg.generator, resolve=True)
    cfg.context.llm_distill.generator = {**own_cfg, "model": "other"}
    own = build.build_context_stages(cfg, gen)["llm_distill"].generator
    assert own is not gen and own.settings()["model"] == "other"
