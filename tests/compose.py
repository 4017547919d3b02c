"""Config composition the way the CLI does it, with outputs in a temporary folder."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, open_dict

from rag_lab.paths import CONFIG_DIR

TOY = Path(__file__).parent / "data" / "toy"
TOY_OVERRIDES = [
    "dataset=beir",
    f"dataset.path={TOY}",
    "embedder=hashing",
    "tokenizer=jieba",
]  # bilingual toy


def compose_evaluate(overrides: list[str], tmp_path: Path) -> DictConfig:
    """The ``evaluate`` config as Hydra composes it; run folder and MLflow store under
    ``tmp_path``."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("evaluate", overrides=overrides)
    with open_dict(cfg):
        cfg.paths.output_dir = str(tmp_path / "run")
        cfg.paths.experiments = str(tmp_path / "experiments")
        cfg.evaluation.latency_queries = 3
    return cfg
