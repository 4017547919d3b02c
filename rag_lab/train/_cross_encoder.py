"""The cross-encoder training ``rag-lab train reranker`` and ``rag-lab train judge`` share: a
one-logit ``CrossEncoder`` from a local encoder checkpoint or HF id (``load_cross_encoder``), and
the trainer run with dev selection, the best checkpoint (step 0 included) put back
(``train_cross_encoder``). What each trains on, its loss and what it writes stay with it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rag_lab.models.resolve import resolve_model
from rag_lab.runtime import progress
from rag_lab.train import common


def load_cross_encoder(tcfg: DictConfig) -> Any:
    """``train.model`` (resolved offline-first) as a ``CrossEncoder`` with one logit,
    ``train.max_length`` and ``train.device``."""
    from sentence_transformers import CrossEncoder

    base_path = resolve_model(str(tcfg.model))
    progress.sync_libraries()  # transformers' "Loading weights" bar follows rag_lab's
    return CrossEncoder(
        base_path, num_labels=1, max_length=int(tcfg.max_length), device=str(tcfg.device)
    )


@dataclass(frozen=True)
class Trained:
    """A finished run: the Trainer's ``TrainOutput`` (``result``), its wall seconds, the step whose
    weights were kept, the Trainer's planned steps and the dev selection (history, losses)."""

    result: Any
    seconds: float
    best_step: int
    max_steps: int
    selection: common.DevSelection

    def summary(self) -> dict[str, Any]:
        """The summary's first keys, the same for every cross-encoder."""
        return {
            "train_seconds": self.seconds,
            "steps": self.result.global_step,
            "best_step": self.best_step,
            "train_loss": float(self.result.training_loss),
        }


def train_cross_encoder(
    model: Any,
    tcfg: DictConfig,
    out_dir: Path,
    dataset: Any,
    loss: Any,
    evaluate: Callable[[], dict[str, float]],
    select_on: str,
    mlflow: Any = None,
    trainable_only: bool = False,
    **arguments: Any,
) -> Trained:
    """Train ``model`` on ``dataset`` with ``loss`` (``common.training_args_common`` plus
    ``arguments``, e.g. ``batch_sampler``), ``evaluate`` scoring dev at step 0, every
    ``train.eval_steps`` and at the end (logged to ``mlflow``; ``trainable_only``: LoRA keeps the
    adapter's weights only); with ``train.select_best`` the best step's weights (by ``select_on``)
    are put back, else the last step's stay."""
    from sentence_transformers.cross_encoder import (
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
    )

    sel = common.DevSelection(
        model, evaluate, select_on, int(tcfg.eval_steps), mlflow, trainable_only=trainable_only
    )
    sel.evaluate(0)
    args = CrossEncoderTrainingArguments(
        **common.training_args_common(tcfg, str(out_dir / "trainer")), **arguments
    )
    trainer = CrossEncoderTrainer(
        model=model, args=args, train_dataset=dataset, loss=loss, callbacks=[sel]
    )
    t0 = time.perf_counter()
    result = trainer.train()
    seconds = time.perf_counter() - t0
    common.unwrap_trained(trainer, model)
    best_step = sel.restore_best() if tcfg.select_best else result.global_step
    return Trained(result, seconds, best_step, trainer.state.max_steps, sel)
