"""rag_lab.train.common without training a model: the training arguments both trainers build,
the optional split capability of datasets, and the run bookkeeping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rag_lab.dataset import BeirDataset
from rag_lab.dataset.base import SplitAware
from tests.compose import TOY
from tests.train.test_train import compose_train

# rag_lab.train.common is imported in the tests that use it: it imports transformers' Trainer
# stack (~3.5 CPU-s), which every xdist worker paid at collection, needed or not


@pytest.mark.parametrize("task, decay", [("embedder", 0.0), ("reranker", 0.01)])
def test_configured_weight_decay_reaches_the_training_arguments(task, decay, tmp_path):
    """The shipped value and an override both arrive (a comment once swallowed the argument, so
    every run trained with transformers' default 0)."""
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.cross_encoder import CrossEncoderTrainingArguments

    from rag_lab.train.common import training_args_common

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
    from rag_lab.train.common import write_summary

    summary = {"steps": 3, "dev/ndcg@10_first_stage": 0.5, "dev_history": [{"step": 0.0}]}
    meta = tmp_path / "meta.json"
    meta.write_text("{}")
    run = FakeRun()
    path = write_summary(run, summary, tmp_path, [meta])
    assert json.loads(Path(path).read_text()) == summary
    assert run.metrics == {"steps": 3.0, "dev/ndcg_at_10_first_stage": 0.5}
    assert run.artifacts == [str(path), str(meta)]
    assert write_summary(None, summary, tmp_path) == path  # no run: the file only


def test_precision_reaches_the_training_arguments_and_a_typo_is_refused(tmp_path):
    from sentence_transformers import SentenceTransformerTrainingArguments

    from rag_lab.errors import ConfigError
    from rag_lab.train.common import training_args_common

    cfg = compose_train("embedder", [], tmp_path)
    assert cfg.train.precision == "bf16"
    args = SentenceTransformerTrainingArguments(**training_args_common(cfg.train, str(tmp_path)))
    assert args.bf16 is True
    cfg = compose_train("embedder", ["train.precision=fp32"], tmp_path)
    assert training_args_common(cfg.train, str(tmp_path))["bf16"] is False
    cfg = compose_train("embedder", ["train.precision=fp16x"], tmp_path)
    with pytest.raises(ConfigError, match="train.precision must be one of fp32, bf16"):
        training_args_common(cfg.train, str(tmp_path))


def test_attention_dropout_is_set_on_every_attention_layer_and_nothing_else():
    from sentence_transformers import SentenceTransformer

    from rag_lab.models.resolve import resolve_model
    from rag_lab.train.common import set_attention_dropout

    st = SentenceTransformer(resolve_model("sentence-transformers/all-MiniLM-L6-v2"), device="cpu")
    assert set_attention_dropout(st, 0.0) == 6  # one per layer
    for name, module in st.named_modules():
        if name.endswith("attention.self"):
            assert module.dropout.p == 0.0
        elif name.endswith("output.dropout"):
            assert module.p == 0.1  # hidden dropout untouched
    assert set_attention_dropout(st[1], 0.0) == 0  # the pooling module has no attention


def test_phase_meter_times_and_peaks_nested_and_repeated_phases():
    import time

    import numpy as np

    from rag_lab.train.common import PhaseMeter

    meter = PhaseMeter(interval=0.01)
    with meter.phase("outer"):
        for _ in range(2):
            with meter.phase("inner"):
                block = np.ones(300 * 2**20 // 8)  # 300 MiB, touched
                time.sleep(0.05)
                del block
        time.sleep(0.02)
    with meter.phase("after"):
        time.sleep(0.02)
    out = meter.summary()
    meter.close()
    assert out["inner"]["count"] == 2 and out["outer"]["count"] == 1
    assert out["outer"]["seconds"] >= out["inner"]["seconds"] >= 0.1
    # the allocation is seen inside both phases, not after them
    assert out["inner"]["peak_rss_mib"] >= out["after"]["peak_rss_mib"] + 250
    assert out["outer"]["peak_rss_mib"] >= out["inner"]["peak_rss_mib"]


def test_bound_heap_sets_the_mmap_threshold_only_when_configured(tmp_path):
    import platform

    from rag_lab.train.common import bound_heap

    cfg = compose_train("embedder", ["train.mmap_threshold_mib=4"], tmp_path)
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert bound_heap(cfg.train) is True  # mallopt accepted it
    assert bound_heap(OmegaConf.create({"mmap_threshold_mib": None})) is False


def test_activation_checkpointing_gives_the_plain_backward_pass_gradients():
    """LoRA on MiniLM in training mode (dropout on): the same seed gives the same LoRA gradients
    with and without checkpointing (the random state is replayed in the recomputation)."""
    import peft
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    from rag_lab.models.resolve import resolve_model
    from rag_lab.train.embedder import checkpoint_activations

    def grads(checkpoint: bool) -> dict[str, torch.Tensor]:
        torch.manual_seed(0)
        st = SentenceTransformer(resolve_model("sentence-transformers/all-MiniLM-L6-v2"))
        st[0].model = peft.get_peft_model(
            st[0].model, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["query", "value"])
        )
        if checkpoint:
            checkpoint_activations(st)
            model = st[0].auto_model
            on = getattr(model, "is_activation_checkpointing", None)
            assert on if on is not None else model.is_gradient_checkpointing
        st.train()
        torch.manual_seed(1)
        feats = [
            st.tokenize(["a pump that leaks", "valve torque"]),
            st.tokenize(["seal failure of pumps", "torque of a valve in N·m"]),
        ]
        MultipleNegativesRankingLoss(st)(feats, None).backward()
        return {n: p.grad.clone() for n, p in st.named_parameters() if p.requires_grad}

    plain, checkpointed = grads(False), grads(True)
    assert plain.keys() == checkpointed.keys() and len(plain) == 24  # 6 layers × 2 × (A, B)
    assert any(g.abs().max() > 0 for g in plain.values())
    for name, g in plain.items():
        torch.testing.assert_close(checkpointed[name], g, rtol=1e-4, atol=1e-6, msg=name)
