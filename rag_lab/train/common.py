"""What embedder and reranker training share: the training split and its leakage guard, the dev
queries, mined candidates, the dev-metric callback with checkpoint selection, the training
arguments, and the run bookkeeping (output folder, MLflow run, ``train_metrics.json``)."""

from __future__ import annotations

import copy
import json
import logging
import math
import resource
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from transformers import TrainerCallback

from rag_lab.dataset.base import LabelledQueries, SplitAware
from rag_lab.errors import ConfigError
from rag_lab.metrics.names import metric_key
from rag_lab.metrics.score import score
from rag_lab.pipeline.build import build_pipeline, build_tracker, instantiate
from rag_lab.pipeline.pipeline import Pipeline
from rag_lab.runtime import progress
from rag_lab.train.data import (
    TrainingExample,
    build_examples,
    leakage_guard,
    split_dev,
    subset,
)
from rag_lab.types import Chunk, Run

log = logging.getLogger(__name__)


@dataclass
class TrainingSetup:
    """``train``: the split trained on (leaky queries removed, dev queries held out); ``dev``: the
    queries that select checkpoints (a named split, or a held-out share of the training split);
    ``mined``: the first-stage run of the configured retrievers for train and dev queries."""

    train: LabelledQueries
    dev: LabelledQueries | None
    pipe: Pipeline
    chunks: dict[str, Chunk]
    mined: Run
    examples: list[TrainingExample]
    info: dict[str, Any]


def _load_split(cfg: DictConfig, split: str) -> LabelledQueries | None:
    """``split`` of the configured dataset; None when a ``SplitAware`` dataset lacks it."""
    ds = instantiate(OmegaConf.merge(cfg.dataset, {"split": split}), "dataset")
    if isinstance(ds, SplitAware) and not ds.has_split(split):
        return None
    loaded: LabelledQueries = ds.load()
    return loaded


def prepare(cfg: DictConfig) -> TrainingSetup:
    """Load, guard, chunk, mine: everything a trainer needs before the model is touched."""
    tcfg = cfg.train
    t0 = time.perf_counter()
    data: LabelledQueries = instantiate(cfg.dataset, "dataset").load()
    dev_split = tcfg.get("dev_split")
    eval_splits = list(tcfg.get("eval_splits", []))
    others = []
    for s in dict.fromkeys([*eval_splits, *([dev_split] if dev_split else [])]):
        # the same split: the guard refuses it
        other = data if s == data.split else _load_split(cfg, s)
        if other is None:
            if s == dev_split:
                raise ConfigError(f"train.dev_split={s}: the dataset has no qrels/{s}.tsv")
            log.info("leakage guard: the dataset has no split %r; nothing to check there", s)
            continue
        others.append(other)
    dropped = leakage_guard(data, others, str(tcfg.get("leakage", "error")))
    answerable = [
        q for q, g in data.qrels.items() if any(v > 0 for v in g.values()) and q not in dropped
    ]
    dev: LabelledQueries | None
    if dev_split:
        train_ids, dev = answerable, next(o for o in others if o.split == dev_split)
    else:
        train_ids, dev_ids = split_dev(answerable, float(tcfg.dev_fraction), int(tcfg.seed))
        dev = replace(subset(data, dev_ids), split=f"{data.split}[dev]") if dev_ids else None
    if tcfg.get("max_queries"):
        train_ids = train_ids[: int(tcfg.max_queries)]
    train = subset(data, train_ids)
    pipe = build_pipeline(cfg, data)
    chunks = pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    queries = {q: data.queries[q].text for q in train_ids}
    if dev is not None:
        queries.update({q: x.text for q, x in dev.queries.items()})
    # the configured first stage (retrievers, fusion, post-processors), its runs cached
    mined = pipe.run(queries).final  # at the pipeline's depth, evaluation.retrieve_k
    neg = tcfg.negatives
    examples = build_examples(
        train,
        train_ids,
        pipe.chunks,
        mined,
        int(neg.num),
        int(neg.depth),
        int(neg.skip_top),
        str(neg.sampling),
        int(tcfg.seed),
    )
    info = {
        "n_train_queries": len(train_ids),
        "n_dev_queries": len(dev.queries) if dev else 0,
        "n_examples": len(examples),
        "n_leaky_dropped": len(dropped),
        "n_chunks": len(chunks),
        "prepare_seconds": time.perf_counter() - t0,
    }
    log.info("training data: %s", info)
    return TrainingSetup(train, dev, pipe, pipe.chunks, mined, examples, info)


def doc_metrics(
    run: Run,
    chunks: Mapping[str, Chunk],
    data: LabelledQueries,
    names: tuple[str, ...] = ("ndcg@10", "recall@10", "mrr@10"),
) -> dict[str, float]:
    """Document-level metrics of a chunk run, scored as ``rag-lab evaluate`` scores it (the same
    ``rag_lab.metrics.score.score``), keyed by the given names."""
    qrels = {q: g for q, g in data.qrels.items() if q in run or q in data.queries}
    flat, _ = score(run, chunks, qrels, list(names))
    return {n: flat[metric_key(n)] for n in names}


class DevSelection(TrainerCallback):
    """A ``transformers`` callback: every ``eval_steps`` optimiser steps (and at the end) computes
    the dev metric with ``evaluate_fn``, logs it and the training loss to MLflow, and keeps a copy
    of the best weights (``trainable_only``: LoRA keeps only the adapter's), which
    ``restore_best`` puts back. Step 0 (the untrained model) is a candidate too, so training that
    only hurts the dev metric hands back the starting weights."""

    def __init__(
        self,
        model: Any,
        evaluate_fn: Callable[[], dict[str, float]],
        metric: str,
        eval_steps: int,
        mlflow: Any = None,
        trainable_only: bool = False,
        meter: PhaseMeter | None = None,
    ) -> None:
        self.model, self.evaluate_fn, self.metric = model, evaluate_fn, metric
        self.meter = meter
        self.eval_steps = max(1, eval_steps)
        self.mlflow, self.trainable_only = mlflow, trainable_only
        self.history: list[dict[str, float]] = []
        self.losses: list[tuple[int, float]] = []
        self.best: tuple[float, int, dict[str, Any]] | None = None

    def _state(self) -> dict[str, Any]:
        return {
            k: v.detach().clone()
            for k, v in self.model.named_parameters()
            if v.requires_grad or not self.trainable_only
        }

    def evaluate(self, step: int) -> dict[str, float]:
        was_training = self.model.training
        self.model.eval()
        t0 = time.perf_counter()
        if self.meter is None:
            metrics = self.evaluate_fn()
        else:
            with self.meter.phase("dev_eval"):
                metrics = self.evaluate_fn()
        self.model.train(was_training)
        metrics = {**metrics, "step": float(step), "eval_seconds": time.perf_counter() - t0}
        self.history.append(metrics)
        value = metrics[self.metric]
        log.info("dev at step %d: %s", step, {k: round(v, 4) for k, v in metrics.items()})
        if self.mlflow is not None:
            self.mlflow.log_metrics(
                {
                    f"dev/{metric_key(k)}": v
                    for k, v in metrics.items()
                    if k != "step" and math.isfinite(v)
                },
                step=step,
            )
        if self.best is None or value > self.best[0]:
            self.best = (value, step, self._state())
        return metrics

    def restore_best(self) -> int:
        """Load the best weights back; returns their step."""
        if self.best is None:
            return -1
        import torch

        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for k, v in self.best[2].items():
                params[k].copy_(v)
        return self.best[1]

    # -- transformers.TrainerCallback hooks ---------------------------------------------------
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append((state.global_step, float(logs["loss"])))
            if self.mlflow is not None:
                self.mlflow.log_metric("train/loss", float(logs["loss"]), step=state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.eval_steps == 0 and state.global_step < state.max_steps:
            self.evaluate(state.global_step)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if not self.history or self.history[-1]["step"] != state.global_step:
            self.evaluate(state.global_step)
        return control


PRECISIONS = ("fp32", "bf16")


def precision(tcfg: DictConfig) -> str:
    """``train.precision``: ``fp32``, or ``bf16`` (mixed precision: autocast to bfloat16, master
    weights fp32; fast where the CPU has AVX512-BF16 / AMX, and it halves activation memory)."""
    value = str(tcfg.get("precision", "fp32"))
    if value not in PRECISIONS:
        raise ConfigError(f"train.precision must be one of {', '.join(PRECISIONS)}, got {value!r}")
    return value


@contextmanager
def autocast(tcfg: DictConfig) -> Iterator[None]:
    """Inference under the training precision (the dev evaluations)."""
    import torch

    device = "cuda" if str(tcfg.get("device", "cpu")).startswith("cuda") else "cpu"
    with torch.autocast(device, dtype=torch.bfloat16, enabled=precision(tcfg) == "bf16"):
        yield


def set_attention_dropout(model: Any, p: float) -> int:
    """Set the dropout on attention probabilities of every attention module (BERT / XLM-R
    ``*.attention.self``: ``dropout``; others: ``attention_dropout``) to ``p``; returns how many
    were set. At 0 PyTorch's fused attention kernel runs in training too, and the attention
    matrices (batch × heads × length², the largest activations at 256 tokens) are never
    stored."""
    import torch

    n = 0
    for module in model.modules():
        if "attention" not in type(module).__name__.lower():
            continue
        for attr in ("dropout", "attention_dropout"):
            d = getattr(module, attr, None)
            if isinstance(d, torch.nn.Dropout):
                d.p = float(p)
                n += 1
            elif isinstance(d, float) and attr == "attention_dropout":
                setattr(module, attr, float(p))
                n += 1
    return n


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


def bound_heap(tcfg: DictConfig) -> bool:
    """``train.mmap_threshold_mib``: serve allocations at least this large with their own memory
    maps (glibc ``mallopt(M_MMAP_THRESHOLD)``), so memory freed after a training step goes back to
    the system. glibc's default threshold starts at 128 KiB but rises to each freed block's size
    (up to 32 MiB): from the second step on, activations land in the heap, which keeps its pages;
    on SciFact that kept ~1 GB resident. ``null`` leaves glibc's default; a no-op (False) where
    the C library is not glibc."""
    mib = tcfg.get("mmap_threshold_mib")
    if mib is None:
        return False
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, int(float(mib) * 2**20)))
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return False


def _rss_mib() -> float:
    """Resident memory of this process now (Linux ``/proc``; elsewhere the peak so far)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:  # pragma: no cover - not Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PhaseMeter:
    """Wall time and peak resident memory per named phase (``with meter.phase("train"):``),
    sampled every ``interval`` seconds by a daemon thread. Phases may nest (a dev evaluation
    inside training) and repeat (their seconds add up, their peak is the highest);
    ``summary()`` gives ``{phase: {"seconds", "peak_rss_mib", "own_peak_rss_mib", "count"}}``,
    where ``own_peak_rss_mib`` counts only the moments no nested phase was running."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.phases: dict[str, dict[str, float]] = {}
        self._active: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            rss = _rss_mib()
            with self._lock:
                self._record(rss)

    def _record(self, rss: float) -> None:
        for name in self._active:
            rec = self.phases[name]
            rec["peak_rss_mib"] = max(rec["peak_rss_mib"], rss)
        if self._active:
            rec = self.phases[self._active[-1]]
            rec["own_peak_rss_mib"] = max(rec["own_peak_rss_mib"], rss)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        rss = _rss_mib()
        with self._lock:
            rec = self.phases.setdefault(
                name, {"seconds": 0.0, "peak_rss_mib": 0.0, "own_peak_rss_mib": 0.0, "count": 0}
            )
            self._active.append(name)
            self._record(rss)
        if self._thread is None:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                rec["seconds"] += time.perf_counter() - t0
                rec["count"] += 1
                self._record(_rss_mib())
                self._active.remove(name)

    def summary(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {k: {**v, "count": int(v["count"])} for k, v in self.phases.items()}

    def close(self) -> None:
        self._stop.set()


def unwrap_trained(trainer: Any, model: Any) -> Any:
    """The trained model with its own ``forward`` back: for bf16 training accelerate wraps the
    model's forward in autocast, which would keep every later encode in bfloat16 (1e-3 off the
    saved fp32 weights' outputs)."""
    return trainer.accelerator.unwrap_model(model, keep_fp32_wrapper=False)


def training_args_common(tcfg: DictConfig, out_dir: str) -> dict[str, Any]:
    """``TrainingArguments`` both trainers share (no checkpoints on disk: DevSelection keeps the
    best)."""
    return dict(
        bf16=precision(tcfg) == "bf16",
        output_dir=out_dir,
        num_train_epochs=float(tcfg.epochs),
        max_steps=int(tcfg.max_steps),
        per_device_train_batch_size=int(tcfg.batch_size),
        learning_rate=float(tcfg.learning_rate),
        warmup_steps=float(tcfg.warmup_ratio),  # a float < 1: a share of the steps
        weight_decay=float(tcfg.get("weight_decay", 0.0)),
        seed=int(tcfg.seed),
        data_seed=int(tcfg.seed),
        logging_steps=max(1, int(tcfg.logging_steps)),
        save_strategy="no",
        eval_strategy="no",
        report_to=[],
        disable_tqdm=not progress.enabled(),  # the Trainer's bar: terminal only, not under CI
        use_cpu=str(tcfg.get("device", "cpu")) == "cpu",
        dataloader_num_workers=0,
    )


def lora_config(lcfg: DictConfig, task_type: str | None = None) -> Any:
    import peft

    return peft.LoraConfig(
        r=int(lcfg.r),
        lora_alpha=int(lcfg.alpha),
        lora_dropout=float(lcfg.dropout),
        target_modules=list(lcfg.target_modules),
        bias="none",
        task_type=task_type,
    )


def copy_config(cfg: DictConfig) -> dict[str, Any]:
    out: dict[str, Any] = copy.deepcopy(OmegaConf.to_container(cfg, resolve=True))  # type: ignore[arg-type]
    return out


# -- run bookkeeping --------------------------------------------------------------------------
def output_dir(cfg: DictConfig) -> Path:
    """Seed torch with ``train.seed`` and create ``train.output_dir``; returns the folder."""
    import torch

    torch.manual_seed(int(cfg.train.seed))
    out = Path(str(cfg.train.output_dir))
    out.mkdir(parents=True, exist_ok=True)
    return out


def tracked_run(
    cfg: DictConfig,
    setup: TrainingSetup,
    task: str,
    run_name: str,
    body: Callable[[Any], dict[str, Any]],
    **params: Any,
) -> dict[str, Any]:
    """``body(mlflow)`` inside one MLflow run of the configured tracker (``body(None)`` with
    ``tracking=none``). Params: the train / dataset / retrievers / chunker configs, ``params``
    (e.g. the embedder's) and the setup's counts; tags: the task and the training split."""
    tracker = build_tracker(cfg)
    if tracker is None:
        return body(None)
    all_params = {
        "train": copy_config(cfg.train),
        **params,
        "dataset": copy_config(cfg.dataset),
        "retrievers": list(cfg.retrievers),
        "chunker": copy_config(cfg.chunker),
        **setup.info,
    }
    tags = {
        "task": task,
        "dataset": setup.train.name,
        "split": setup.train.split,
        "dataset_fingerprint": setup.train.fingerprint,
    }
    with tracker.active_run(run_name, all_params, tags) as mlflow:
        return body(mlflow)


def write_summary(
    mlflow: Any, summary: Mapping[str, Any], out_dir: Path, artifacts: Sequence[Path] = ()
) -> Path:
    """``train_metrics.json`` in ``out_dir``; with a run, its numbers as metrics (``metric_key``
    names) and the file plus ``artifacts`` as artifacts. Returns the file."""
    path = out_dir / "train_metrics.json"
    path.write_text(json.dumps(summary, indent=2, default=float))
    if mlflow is not None:
        mlflow.log_metrics(
            {metric_key(k): float(v) for k, v in summary.items() if isinstance(v, (int, float))}
        )
        for p in (path, *artifacts):
            mlflow.log_artifact(str(p))
    return path
