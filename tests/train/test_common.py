"""rag_lab.train.common without training a model: the training arguments both trainers build,
the optional split capability of datasets, and the run bookkeeping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rag_lab.dataset import BeirDataset
from rag_lab.dataset.base import SplitAware
from rag_lab.train.common import training_args_common, write_summary
from tests.compose import TOY
from tests.train.test_train import compose_train


@pytest.mark.parametrize("task, decay", [("embedder", 0.0), ("reranker", 0.01)])
def test_configured_weight_decay_reaches_the_training_arguments(task, decay, tmp_path):
    """The shipped value and an override both arrive (a comment once swallowed the argument, so
    every run trained with transformers' default 0)."""
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.cross_encoder import CrossEncoderTrainingArguments

    arguments = {
        "embedder": SentenceTransformerTrainingArguments,
        "reranker": CrossEncoderTrainingArguments,
    }[task]
    cfg = compose_train(task, [], tmp_path)
    assert cfg.train.weight_decay == decay
    args = arguments(**training_args_common(cfg.train, str(tmp_path / "t")))
    assert args.weight_decay == pytest.approx(decay)
    cfg = compose_train(task, ["train.weight_decay=0.2", "train.warmup_ratio=0.25"], tmp_path)
    args = arguments(**training_args_common(cfg.train, str(tmp_path / "t")))
    assert args.weight_decay == pytest.approx(0.2)
    assert args.seed == cfg.train.seed and args.learning_rate == cfg.train.learning_rate
    assert args.save_strategy == "no" and args.report_to == []


def test_beir_datasets_declare_their_splits():
    ds = BeirDataset(str(TOY), "test")
    assert isinstance(ds, SplitAware)
    assert ds.has_split("dev") and not ds.has_split("train")


def test_a_missing_eval_split_of_a_split_aware_dataset_is_skipped(tmp_path):
    from rag_lab.train.common import _load_split

    cfg = OmegaConf.create(
        {"dataset": {"_target_": "rag_lab.dataset.BeirDataset", "path": str(TOY), "split": "test"}}
    )
    assert _load_split(cfg, "train") is None
    dev = _load_split(cfg, "dev")
    assert dev is not None and dev.split == "dev"


class FakeRun:
    def __init__(self) -> None:
        self.metrics: dict[str, float] = {}
        self.artifacts: list[str] = []

    def log_metrics(self, metrics: dict[str, float]) -> None:
        self.metrics.update(metrics)

    def log_artifact(self, path: str) -> None:
        self.artifacts.append(path)


def test_summary_is_written_and_logged_with_mlflow_safe_keys(tmp_path):
    summary = {"steps": 3, "dev/ndcg@10_first_stage": 0.5, "dev_history": [{"step": 0.0}]}
    meta = tmp_path / "meta.json"
    meta.write_text("{}")
    run = FakeRun()
    path = write_summary(run, summary, tmp_path, [meta])
    assert json.loads(Path(path).read_text()) == summary
    assert run.metrics == {"steps": 3.0, "dev/ndcg_at_10_first_stage": 0.5}
    assert run.artifacts == [str(path), str(meta)]
    assert write_summary(None, summary, tmp_path) == path  # no run: the file only
