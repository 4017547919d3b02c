"""``rag-lab train reranker``: train a cross-encoder from any local encoder checkpoint (or continue
from a pretrained reranker) on a labelled split, with mined hard negatives.

Guards against the failure mode of an under-trained reranker (one that wrecks a good first-stage
ranking): the dev metric of reranking the first stage's top ``rerank_depth`` is computed during
training and the best checkpoint is kept — the first stage's own order counts as a candidate
(step 0 with interpolation 0) — and the interpolation weight between reranker and first-stage
scores is chosen on dev and written next to the model (``rag_lab_reranker.json``), where
``reranker=cross_encoder`` reads it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np
from omegaconf import DictConfig

from rag_lab.errors import ConfigError
from rag_lab.ranking import ranked
from rag_lab.reranker.cross_encoder import RERANKER_META, interpolate
from rag_lab.train import common
from rag_lab.train._cross_encoder import load_cross_encoder, train_cross_encoder
from rag_lab.train.common import TrainingSetup
from rag_lab.types import Run

log = logging.getLogger("rag_lab.train.reranker")
WEIGHTS = tuple(round(w, 2) for w in np.linspace(0.0, 1.0, 11))


class DevReranking:
    """Reranks the dev queries' first-stage top ``depth`` with the current model; reports the pure
    reranker metric and the best interpolation with the first stage."""

    def __init__(self, setup: TrainingSetup, depth: int, batch_size: int, metric: str) -> None:
        assert setup.dev is not None
        self.setup, self.depth, self.batch_size, self.metric = setup, depth, batch_size, metric
        self.heads = {q: ranked(setup.mined.get(q, {}))[:depth] for q in setup.dev.queries}
        self.pairs = [
            (setup.dev.queries[q].text, setup.chunks[c].index_text)
            for q, h in self.heads.items()
            for c in h
        ]
        self.last_scores: np.ndarray | None = None

    def run_for(self, scores: np.ndarray, weight: float) -> Run:
        out: Run = {}
        pos = 0
        for q, head in self.heads.items():
            ce = scores[pos : pos + len(head)]
            first = np.array([self.setup.mined[q][c] for c in head])
            pos += len(head)
            out[q] = (
                {c: float(s) for c, s in zip(head, interpolate(first, ce, weight))} if head else {}
            )
        return out

    def sweep_weights(self, scores: np.ndarray) -> dict[float, float]:
        dev = self.setup.dev
        assert dev is not None
        return {
            w: common.doc_metrics(self.run_for(scores, w), self.setup.chunks, dev, (self.metric,))[
                self.metric
            ]
            for w in WEIGHTS
        }

    def __call__(self, model: Any) -> dict[str, float]:
        scores = np.asarray(
            model.predict(
                self.pairs,
                batch_size=self.batch_size,
                show_progress_bar=False,  # dev scoring runs inside the Trainer's bar
                convert_to_numpy=True,
                activation_fn=None,
            ),
            dtype=np.float64,
        ).reshape(-1)
        self.last_scores = scores
        by_w = self.sweep_weights(scores)
        best_w = best_weight(by_w)
        return {
            self.metric: by_w[1.0],
            f"{self.metric}_first_stage": by_w[0.0],
            f"{self.metric}_interpolated": by_w[best_w],
            "best_interpolation": float(best_w),
        }


def best_weight(by_weight: dict[float, float]) -> float:
    """The interpolation weight with the best dev metric; ties: the more conservative (lower)."""
    return max(by_weight, key=lambda w: (by_weight[w], -w))


def train_reranker(cfg: DictConfig) -> dict[str, Any]:
    import torch
    from sentence_transformers.cross_encoder.losses import (
        BinaryCrossEntropyLoss,
        MultipleNegativesRankingLoss,
    )

    # mypy sees the project's datasets/ folder
    from datasets import Dataset  # type: ignore[attr-defined]

    tcfg = cfg.train
    out_dir = common.output_dir(cfg)
    common.bound_heap(tcfg)
    setup = common.prepare(cfg)
    if setup.dev is None:
        raise ConfigError(
            "reranker training selects checkpoints on dev: set "
            "train.dev_fraction > 0 or train.dev_split"
        )
    ce = load_cross_encoder(tcfg)
    use_lora = bool(tcfg.lora.enabled)
    if use_lora:
        import peft

        lora = common.lora_config(tcfg.lora, task_type="SEQ_CLS")
        ce[0].model = peft.get_peft_model(ce[0].model, lora)
    n_neg = int(tcfg.negatives.num)
    loss_name = str(tcfg.loss)
    if loss_name == "mnrl":
        cols: dict[str, list[Any]] = {
            "anchor": [e.query for e in setup.examples],
            "positive": [e.positive for e in setup.examples],
        }
        for i in range(n_neg):
            cols[f"negative_{i + 1}"] = [e.negatives[i] for e in setup.examples]
        loss: Any = MultipleNegativesRankingLoss(
            ce,
            num_negatives=int(tcfg.in_batch_negatives),
            scale=float(tcfg.scale),  # type: ignore[arg-type]
        )
        sampler = "no_duplicates"
    elif loss_name == "bce":
        cols = {"query": [], "document": [], "label": []}
        for e in setup.examples:
            for text, label in [(e.positive, 1.0), *[(n, 0.0) for n in e.negatives]]:
                cols["query"].append(e.query)
                cols["document"].append(text)
                cols["label"].append(label)
        loss = BinaryCrossEntropyLoss(ce, pos_weight=torch.tensor(float(n_neg)))
        sampler = "batch_sampler"
    else:
        raise ConfigError(f"train.loss must be mnrl or bce, got {loss_name!r}")
    train_ds = Dataset.from_dict(cols)
    metric = str(tcfg.dev_metric)
    dev_eval = DevReranking(setup, int(tcfg.rerank_depth), int(tcfg.eval_batch_size), metric)

    def run(mlflow: Any) -> dict[str, Any]:
        trained = train_cross_encoder(
            ce,
            tcfg,
            out_dir,
            train_ds,
            loss,
            lambda: dev_eval(ce),
            str(tcfg.select_on),
            mlflow,
            trainable_only=use_lora,
            batch_sampler=sampler,
        )
        # the interpolation weight, chosen on dev for the kept checkpoint
        dev_eval(ce)
        assert dev_eval.last_scores is not None
        by_w = dev_eval.sweep_weights(dev_eval.last_scores)
        weight = best_weight(by_w) if tcfg.interpolation is None else float(tcfg.interpolation)
        in_batch = int(tcfg.in_batch_negatives) if loss_name == "mnrl" else 0
        pairs_per_epoch = len(setup.examples) * (1 + n_neg + in_batch)
        epochs = float(tcfg.epochs if tcfg.max_steps < 0 else 1)
        summary: dict[str, Any] = {
            **trained.summary(),
            "interpolation": weight,
            "pairs_per_second": pairs_per_epoch
            * trained.result.global_step
            / max(1, trained.max_steps)
            * epochs
            / trained.seconds,
            f"dev/{metric}_first_stage": by_w[0.0],
            f"dev/{metric}_reranker_only": by_w[1.0],
            f"dev/{metric}_interpolated": by_w[weight],
            "dev_by_interpolation": {str(k): v for k, v in by_w.items()},
            "dev_history": trained.selection.history,
            "loss_curve": trained.selection.losses,
            **setup.info,
        }
        model_dir = out_dir / "model"
        if use_lora:
            ce[0].model = ce[0].model.merge_and_unload()
        ce.save_pretrained(str(model_dir))
        meta = {
            "interpolation": weight,
            "base_model": str(tcfg.model),
            "first_stage": list(cfg.retrievers),
            "rerank_depth": int(tcfg.rerank_depth),
            "dev_metric": metric,
            "dev": {k: v for k, v in summary.items() if k.startswith("dev/")},
            "trained_with": "rag-lab train reranker",
        }
        (model_dir / RERANKER_META).write_text(json.dumps(meta, indent=2))
        common.write_summary(mlflow, summary, out_dir, [model_dir / RERANKER_META])
        return summary

    run_name = (
        cfg.get("run_name")
        or f"train reranker {tcfg.model} ({loss_name}{', lora' if use_lora else ''})"
    )
    summary = common.tracked_run(cfg, setup, "train_reranker", run_name, run)
    print(
        f"\ntrained a cross-encoder from {tcfg.model} on {setup.info['n_examples']} examples "
        f"({loss_name}), {summary['steps']} steps in {summary['train_seconds']:.1f} s; "
        f"kept step {summary['best_step']}"
    )
    for key in (k for k in summary if k.startswith("dev/")):
        print(f"  {key}: {summary[key]:.4f}")
    print(f"  interpolation (chosen on dev): {summary['interpolation']}")
    print(
        f"  model: {out_dir / 'model'}   "
        f"(reranker=cross_encoder reranker.model={out_dir / 'model'})"
    )
    return summary
