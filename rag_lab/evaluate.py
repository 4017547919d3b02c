"""``evaluate(cfg)``: build a pipeline from config, run it over a labelled split, score it, write
the run folder and log it. The recipe only orchestrates; each step is a library function.

Writes ``metrics.json``, ``per_query.parquet``, ``dataset_fingerprint`` and
``config_resolved.yaml`` into ``paths.output_dir`` and logs the same (plus params and tags) to
the configured tracker. The CLI entry point is ``rag_lab.cli.evaluate``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from rag_lab import build, console, outputs
from rag_lab.answers import answer_queries
from rag_lab.errors import ConfigError
from rag_lab.metrics.runtime import runtime_metrics
from rag_lab.metrics.score import check_labels, check_metric_names, score_split, with_answers
from rag_lab.sweep.context import check_sweep, sweep_context
from rag_lab.tracking.evaluation import log_evaluation

if TYPE_CHECKING:
    import pandas as pd

    from rag_lab.dataset.base import LabelledQueries
    from rag_lab.pipeline import Pipeline
    from rag_lab.types import Run

log = logging.getLogger("rag_lab.evaluate")


def check_config(cfg: DictConfig) -> None:
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(
            f"missing required setting(s): {', '.join(missing)} (e.g. {missing[0]}=...)"
        )
    check_sweep(cfg)
    check_metric_names(list(cfg.evaluation.metrics))


def load(cfg: DictConfig) -> tuple[LabelledQueries, Pipeline, list[str]]:
    """Build the dataset and the pipeline, load (parse, chunk) the corpus; label warnings."""
    data = build.build_dataset(cfg).load()
    pipe = build.build_pipeline(cfg)
    chunks = pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    doc_ids = {c.doc_id for c in chunks}
    log.info(
        "dataset %s/%s: %d documents, %d chunks, %d queries (fingerprint %s)",
        data.name,
        data.split,
        len(doc_ids),
        len(chunks),
        len(data.queries),
        data.fingerprint,
    )
    return data, pipe, check_labels(data, doc_ids)


def answer(
    cfg: DictConfig,
    data: LabelledQueries,
    pipe: Pipeline,
    final: Run,
    metrics: dict[str, float],
    table: pd.DataFrame,
) -> pd.DataFrame:
    """The answer stage when a generator is configured: its metrics join ``metrics``; the
    per-query table comes back with its columns."""
    generator = build.build_generator(cfg)
    if generator is None:
        return table
    t0 = time.perf_counter()
    answers, rows = answer_queries(
        data,
        pipe.chunks,
        final,
        generator,
        build.build_judge(cfg),
        int(cfg.evaluation.answer_k),
        cache=pipe.cache,
    )
    metrics.update(answers, answer_seconds=time.perf_counter() - t0)
    return with_answers(table, rows)


def track(
    cfg: DictConfig,
    resolved: dict[str, Any],
    data: LabelledQueries,
    pipe: Pipeline,
    metrics: dict[str, float],
    warnings: list[str],
    out_dir: Path,
) -> None:
    """Log the run to the configured tracker (none with ``tracking=none``)."""
    tracker = build.build_tracker(cfg)
    if tracker is None:
        return
    run_id = log_evaluation(
        tracker,
        resolved=resolved,
        dataset=data.name,
        split=data.split,
        fingerprint=data.fingerprint,
        retrievers=list(pipe.retrievers),
        metrics=metrics,
        warnings=[*data.warnings, *warnings],
        out_dir=out_dir,
        run_name=cfg.get("run_name"),
        sweep=sweep_context(),
    )
    (out_dir / outputs.MLFLOW_RUN_FILE).write_text(run_id)
    print(f"  mlflow run: {run_id} ({cfg.tracking.uri})")


def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Run the configured pipeline over the configured split; returns the flat metrics dict."""
    check_config(cfg)
    t_start = time.perf_counter()
    data, pipe, warnings = load(cfg)
    ecfg = cfg.evaluation
    queries = {q: x.text for q, x in data.queries.items()}
    result = pipe.run(queries, int(ecfg.retrieve_k), int(ecfg.latency_queries))
    metrics, table = score_split(result.final, pipe.chunks, data, ecfg)
    table = answer(cfg, data, pipe, result.final, metrics, table)
    metrics.update(
        n_documents=len({c.doc_id for c in pipe.chunks.values()}), n_chunks=len(pipe.chunks)
    )
    metrics.update(runtime_metrics(result, pipe.timings, list(pipe.retrievers)))
    metrics.update(pipe.cache_counters())
    metrics["total_seconds"] = time.perf_counter() - t_start

    out_dir = Path(cfg.paths.output_dir)
    outputs.write_scores(out_dir, metrics, table, data.fingerprint)
    resolved: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    outputs.write_config(out_dir, resolved)
    print(
        console.run_summary(console.title(data.name, data.split, pipe), metrics, list(ecfg.metrics))
        + f"\n\n  outputs: {out_dir}"
    )
    track(cfg, resolved, data, pipe, metrics, warnings, out_dir)
    return metrics


if __name__ == "__main__":  # `python -m rag_lab.evaluate ...` = `rag-lab evaluate ...`
    from rag_lab.cli.evaluate import main

    main()
