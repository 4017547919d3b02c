"""rag_lab.sweep.context: what sweep jobs and the sweep callback share (the parent file, a job's
view of its sweep, the refusals), and metric direction read from one place everywhere a sweep
decides it (callback, Optuna direction, leaderboard)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from rag_lab.errors import ConfigError
from rag_lab.paths import CONFIG_DIR
from rag_lab.sweep.context import (
    PARENT_FILE,
    check_direction,
    check_sweep,
    direction_refusal,
    selection_refusal,
    sweep_context,
)


@pytest.mark.parametrize(
    "metric, direction",
    [
        ("ndcg@10", "maximize"),
        ("ndcg_at_10", "MAXIMIZE"),
        ("noise_ratio@5", "minimize"),
        ("evidence_noise_ratio_at_5", "minimize"),
        ("answer/wrong_refusal_rate", "minimize"),
        ("answer/refusal_rate_unanswerable", "maximize"),
        ("evidence_hit_rate_at_5", "maximize"),
    ],
)
def test_agreeing_directions_pass(metric, direction):
    assert direction_refusal(metric, direction) is None


@pytest.mark.parametrize(
    "metric, direction, want",
    [
        ("ndcg@10", "minimize", "maximize"),
        ("evidence_noise_ratio_at_5", "maximize", "minimize"),  # once mistaken for higher-is-better
        ("answer/wrong_refusal_rate", "maximize", "minimize"),
        ("noise_ratio@5", "maximize", "minimize"),
    ],
)
def test_contradicting_directions_are_refused_with_the_fix(metric, direction, want):
    msg = direction_refusal(metric, direction)
    assert msg is not None and "\n" not in msg
    assert f"optimized_metric={metric}" in msg and f"hydra.sweeper.direction={want}" in msg


def test_direction_edge_cases():
    from hydra_plugins.hydra_optuna_sweeper.config import Direction

    assert direction_refusal(None, "minimize") is None  # no metric: nothing to compare
    assert direction_refusal("ndcg@10", None) is None  # not an Optuna sweep
    assert direction_refusal("ndcg@10", Direction.minimize) is not None  # the plugin's default
    assert direction_refusal("ndcg@10", ["maximize"]) is None
    assert "one direction" in direction_refusal("ndcg@10", ["maximize", "minimize"])
    assert "maximize or minimize" in direction_refusal("ndcg@10", "upwards")


def test_check_direction_reads_the_composed_sweeper():
    cfg = OmegaConf.create(
        {"optimized_metric": "ndcg@10", "hydra": {"sweeper": {"direction": "minimize"}}}
    )
    with pytest.raises(ConfigError, match="contradicts optimized_metric=ndcg@10"):
        check_direction(cfg)
    cfg.hydra.sweeper.direction = "maximize"
    check_direction(cfg)
    # a job's config (no hydra node) outside a Hydra app: nothing to check, nothing refused
    check_sweep(OmegaConf.create({"optimized_metric": "ndcg@10", "dataset": {"split": "test"}}))


@pytest.mark.parametrize("search", ["chunking", "fusion_weights", "rrf_k", "router"])
def test_shipped_optuna_searches_agree_with_their_metric(search):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("evaluate", overrides=[f"hparams_search={search}"], return_hydra_config=True)
    assert cfg.hydra.sweeper.direction in ("maximize", "minimize")
    check_direction(cfg)
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        flipped = compose(
            "evaluate",
            overrides=[f"hparams_search={search}", "hydra.sweeper.direction=minimize"],
            return_hydra_config=True,
        )
    with pytest.raises(ConfigError, match="contradicts"):
        check_direction(flipped)


def test_outside_a_multirun_there_is_no_sweep_context():
    assert sweep_context() is None
    assert PARENT_FILE == "sweep_parent.json"
    assert "dataset.split=test" in selection_refusal("test")


def test_the_callback_refuses_before_opening_a_parent(tmp_path):
    from rag_lab.sweep.callback import MlflowSweepCallback

    cfg = OmegaConf.create(
        {
            "dataset": {"split": "dev"},
            "optimized_metric": "evidence_noise_ratio@5",
            "hydra": {
                "sweeper": {"direction": "maximize"},
                "sweep": {"dir": str(tmp_path / "s")},
                "overrides": {"task": []},
            },
        }
    )
    with pytest.raises(ConfigError, match="hydra.sweeper.direction=minimize"):
        MlflowSweepCallback().on_multirun_start(cfg)
    assert not (tmp_path / "s" / PARENT_FILE).exists()
    cfg.hydra.sweeper.direction = "minimize"
    MlflowSweepCallback().on_multirun_start(cfg)
    assert (tmp_path / "s" / PARENT_FILE).exists()


def test_the_callback_decides_direction_with_the_metric_names_module():
    import rag_lab.sweep.callback as callback
    from rag_lab.metrics import names

    assert callback.higher_is_better is names.higher_is_better
    assert not callback.higher_is_better("evidence_noise_ratio_at_5")
