"""``rag-lab train embedder``: fine-tune a sentence-transformers embedder (LoRA or full) on a
labelled split with MultipleNegativesRankingLoss and mined hard negatives.

Writes into ``train.output_dir``: ``adapter/`` (LoRA weights + ``rag_lab_adapter.json``, loadable
with ``embedder=lora embedder.adapter=<dir>``), ``merged/`` (an ordinary SentenceTransformer,
``embedder=sentence_transformer embedder.model=<dir>``) and ``train_metrics.json``. The dev metric
is tracked during training and the best checkpoint (step 0 included) is the one saved.
"""

from __future__ import annotations

import json
import logging
import random
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from rag_lab.embedder.sentence_transformer import SentenceTransformerEmbedder
from rag_lab.errors import ConfigError
from rag_lab.pipeline.build import instantiate
from rag_lab.ranking import ranked
from rag_lab.train.common import (
    DevSelection,
    PhaseMeter,
    TrainingSetup,
    autocast,
    bound_heap,
    copy_config,
    doc_metrics,
    lora_config,
    output_dir,
    prepare,
    set_attention_dropout,
    tracked_run,
    training_args_common,
    unwrap_trained,
    write_summary,
)
from rag_lab.types import Run

log = logging.getLogger("rag_lab.train.embedder")
ADAPTER_META = "rag_lab_adapter.json"


def dev_pool(setup: TrainingSetup, size: int, depth: int, seed: int) -> list[str]:
    """Chunk ids the dev evaluation searches: every dev query's mined top ``depth`` and relevant
    chunks, topped up with random chunks to ``size`` (all chunks when the corpus is smaller). A
    proxy for the full corpus that makes a dev evaluation cost seconds, not the full
    re-embedding."""
    if setup.dev is None:
        return []
    if size <= 0 or size >= len(setup.chunks):  # the whole corpus
        return sorted(setup.chunks)
    pool: set[str] = set()
    for q in setup.dev.queries:
        pool.update(ranked(setup.mined.get(q, {}))[:depth])
    rel_docs = {d for g in setup.dev.qrels.values() for d, v in g.items() if v > 0}
    pool.update(c for c, ch in setup.chunks.items() if ch.doc_id in rel_docs)
    rest = sorted(set(setup.chunks) - pool)
    random.Random(seed).shuffle(rest)
    pool.update(rest[: max(0, size - len(pool))])
    return sorted(pool)


def dense_run(
    st: Any,
    queries: dict[str, str],
    texts: dict[str, str],
    query_prompt: str | None,
    doc_prompt: str | None,
    batch_size: int,
    k: int = 100,
) -> Run:
    ids = list(texts)
    kw: dict[str, Any] = dict(
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,  # dev scoring runs inside the Trainer's bar: no second bar
    )
    d = st.encode([texts[i] for i in ids], prompt=doc_prompt, **kw)
    qids = list(queries)
    q = st.encode([queries[i] for i in qids], prompt=query_prompt, **kw)
    sims = q @ d.T
    top = np.argsort(-sims, axis=1)[:, :k]
    return {qid: {ids[j]: float(sims[i, j]) for j in top[i]} for i, qid in enumerate(qids)}


def train_embedder(cfg: DictConfig) -> dict[str, Any]:
    """Train, select on dev, save; returns the summary written to ``train_metrics.json`` plus
    ``"model"``, the trained SentenceTransformer (LoRA merged)."""
    from sentence_transformers import (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )

    # mypy sees the project's datasets/ folder
    from datasets import Dataset  # type: ignore[attr-defined]

    tcfg = cfg.train
    out_dir = output_dir(cfg)
    bound_heap(tcfg)
    meter = PhaseMeter()
    base = instantiate(cfg.embedder, "embedder")
    if not isinstance(base, SentenceTransformerEmbedder):
        raise ConfigError(
            f"train embedder needs a sentence-transformers embedder, got "
            f"{type(base).__name__} (embedder=minilm, e5_small or "
            "sentence_transformer embedder.model=...)"
        )
    if base.backend != "torch":  # training needs the torch weights (e5 infers in ONNX int8)
        base.backend, base.quantize = "torch", "none"
    with meter.phase("prepare"):
        setup = prepare(cfg)
        st = base.load()  # its own copy: trained in place
    qp, dp = base.query_prompt, base.document_prompt
    use_lora = bool(tcfg.lora.enabled)
    if use_lora:
        import peft

        st[0].model = peft.get_peft_model(st[0].model, lora_config(tcfg.lora))
    if tcfg.get("attention_dropout") is not None:
        if not set_attention_dropout(st, float(tcfg.attention_dropout)):
            raise ConfigError(
                f"train.attention_dropout: {base.model_name} has no attention dropout this "
                "trainer knows (BERT / XLM-R `attention.self.dropout`); set it to null"
            )
    if tcfg.get("gradient_checkpointing"):
        checkpoint_activations(st)
    # inputs are cut to train.max_seq_length while training, to the embedder's own length for
    # the dev evaluations (as the trained model will be used)
    eval_length = st.max_seq_length
    train_length = int(tcfg.get("max_seq_length") or eval_length)
    n_trainable = sum(p.numel() for p in st.parameters() if p.requires_grad)
    n_total = sum(p.numel() for p in st.parameters())

    n_neg = int(tcfg.negatives.num)
    cols: dict[str, list[str]] = {
        "anchor": [(qp or "") + e.query for e in setup.examples],
        "positive": [(dp or "") + e.positive for e in setup.examples],
    }
    for i in range(n_neg):
        cols[f"negative_{i + 1}"] = [(dp or "") + e.negatives[i] for e in setup.examples]
    train_ds = Dataset.from_dict(cols)
    loss_name = str(tcfg.loss)
    if loss_name == "mnrl":
        loss = MultipleNegativesRankingLoss(st, scale=float(tcfg.scale))
    elif loss_name == "cached_mnrl":
        loss = CachedMultipleNegativesRankingLoss(
            st, scale=float(tcfg.scale), mini_batch_size=int(tcfg.mini_batch_size)
        )
    else:
        raise ConfigError(f"train.loss must be mnrl or cached_mnrl, got {loss_name!r}")

    pool = dev_pool(setup, int(tcfg.dev_corpus_size), int(tcfg.dev_pool_depth), int(tcfg.seed))
    dev_queries = {q: x.text for q, x in setup.dev.queries.items()} if setup.dev else {}
    pool_texts = {c: setup.chunks[c].index_text for c in pool}

    def evaluate_dev() -> dict[str, float]:
        st.max_seq_length = eval_length
        try:
            with autocast(tcfg):
                run = dense_run(st, dev_queries, pool_texts, qp, dp, int(tcfg.eval_batch_size))
        finally:
            st.max_seq_length = train_length
        return doc_metrics(run, setup.chunks, setup.dev)  # type: ignore[arg-type]

    def run(mlflow: Any) -> dict[str, Any]:
        metric = str(tcfg.dev_metric)
        sel = DevSelection(
            st,
            evaluate_dev,
            metric,
            int(tcfg.eval_steps),
            mlflow,
            trainable_only=use_lora,
            meter=meter,
        )
        if dev_queries:
            sel.evaluate(0)
        args = SentenceTransformerTrainingArguments(
            **training_args_common(tcfg, str(out_dir / "trainer")), batch_sampler="no_duplicates"
        )
        trainer = SentenceTransformerTrainer(
            model=st,
            args=args,
            train_dataset=train_ds,
            loss=loss,
            callbacks=[sel] if dev_queries else [],
        )
        st.max_seq_length = train_length
        t0 = time.perf_counter()
        with meter.phase("train"):
            result = trainer.train()
        unwrap_trained(trainer, st)
        train_seconds = time.perf_counter() - t0
        st.max_seq_length = eval_length
        select = dev_queries and tcfg.select_best
        best_step = sel.restore_best() if select else result.global_step
        per_second = (
            len(train_ds) * float(tcfg.epochs) / train_seconds
            if tcfg.max_steps < 0
            else result.global_step * int(tcfg.batch_size) / train_seconds
        )
        summary: dict[str, Any] = {
            "train_seconds": train_seconds,
            "steps": result.global_step,
            "best_step": best_step,
            "train_loss": float(result.training_loss),
            "trainable_params": n_trainable,
            "total_params": n_total,
            "examples_per_second": per_second,
            "dev_search_chunks": len(pool),
            **setup.info,
        }
        if sel.history:
            first, best = sel.history[0], max(sel.history, key=lambda h: h[metric])
            summary.update(
                {f"dev_start/{metric}": first[metric], f"dev_best/{metric}": best[metric]}
            )
            summary["dev_history"] = sel.history
        summary["loss_curve"] = sel.losses
        with meter.phase("save"):
            save(st, base, out_dir, use_lora)
        before = sel.history[0]["eval_seconds"] if dev_queries and sel.history else 0.0
        summary["phases"] = phases(meter, before)
        summary["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        meta = out_dir / "adapter" / ADAPTER_META if use_lora else out_dir / "merged" / ADAPTER_META
        write_summary(mlflow, summary, out_dir, [meta])
        return summary

    run_name = (
        cfg.get("run_name")
        or f"train embedder {base.model_name} ({'lora' if use_lora else 'full'})"
    )
    summary = tracked_run(
        cfg, setup, "train_embedder", run_name, run, embedder=copy_config(cfg.embedder)
    )
    print(
        f"\ntrained {base.model_name} ({'LoRA' if use_lora else 'full'}) on "
        f"{setup.info['n_examples']} pairs, {summary['steps']} steps in "
        f"{summary['train_seconds']:.1f} s; best dev step {summary['best_step']}"
    )
    for key in (k for k in summary if k.startswith(("dev_start", "dev_best"))):
        print(f"  {key}: {summary[key]:.4f}")
    if use_lora:
        print(
            f"  adapter: {out_dir / 'adapter'}   "
            f"(embedder=lora embedder.adapter={out_dir / 'adapter'})"
        )
    print(
        f"  merged:  {out_dir / 'merged'}   "
        f"(embedder=sentence_transformer embedder.model={out_dir / 'merged'})"
    )
    # the trained model (merged) for in-process callers; not in the JSON
    return {**summary, "model": st}


def checkpoint_activations(st: Any) -> None:
    """Keep each transformer layer's input only and recompute its activations in the backward
    pass (the non-reentrant variant, which also works when no input needs a gradient, as with
    LoRA; the random state is replayed, so gradients are those of a plain backward pass)."""
    model = st[0].auto_model
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(
            f"train.gradient_checkpointing: {type(model).__name__} does not support it; "
            "set it to false"
        )
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers 5's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def phases(meter: PhaseMeter, dev_before_training: float) -> dict[str, dict[str, float]]:
    """The meter's phases, with ``train_steps``: training without the dev evaluations run inside
    it (``dev_before_training``: the seconds of the step-0 evaluation, which ran before; its peak
    is the training phase's own)."""
    out = meter.summary()
    meter.close()
    if "train" in out:
        train = out["train"]
        inside = out.get("dev_eval", {"seconds": 0.0})["seconds"] - dev_before_training
        out["train_steps"] = {
            "seconds": train["seconds"] - inside,
            "peak_rss_mib": train["own_peak_rss_mib"],
            "count": train["count"],
        }
    return out


def save(st: Any, base: SentenceTransformerEmbedder, out_dir: Path, use_lora: bool) -> None:
    """The adapter (LoRA only) and the merged model, each with the prompts it was trained
    with."""
    meta = {
        "base_model": base.model_name,
        "query_prompt": base.query_prompt,
        "document_prompt": base.document_prompt,
        "max_seq_length": base.max_seq_length,
        "normalize": base.normalize,
        "trained_with": "rag-lab train embedder",
    }
    if use_lora:
        adapter = out_dir / "adapter"
        st[0].model.save_pretrained(str(adapter))
        (adapter / ADAPTER_META).write_text(json.dumps(meta, indent=2))
        st[0].model = st[0].model.merge_and_unload()
    merged = out_dir / "merged"
    st.save(str(merged))
    (merged / ADAPTER_META).write_text(json.dumps({**meta, "merged": True}, indent=2))
