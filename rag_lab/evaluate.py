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

from omegaconf import DictConfig, OmegaConf

from rag_lab import build, console, outputs
from rag_lab.answers import answer_queries
from rag_lab.cache import diff_stats
from rag_lab.errors import ConfigError
from rag_lab.metrics.runtime import runtime_metrics
from rag_lab.metrics.score import check_labels, check_metric_names, score_split, with_answers
from rag_lab.sweep.context import check_sweep, sweep_context
from rag_lab.tracking.evaluation import log_evaluation

log = logging.getLogger("rag_lab.evaluate")


def check_config(cfg: DictConfig) -> None:
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(f"missing required setting(s): {', '.join(missing)} (e.g. {missing[0]}=...)")
    check_sweep(cfg)
    check_metric_names(list(cfg.evaluation.metrics))


def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Run the configured pipeline over the configured split; returns the flat metrics dict."""
    check_config(cfg)
    t_start = time.perf_counter()
    out_dir = Path(cfg.paths.output_dir)
    data = build.build_dataset(cfg).load()
    pipe = build.build_pipeline(cfg)
    cache_before = pipe.cache.stats() if pipe.cache else {}
    chunks = pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    doc_ids = {c.doc_id for c in chunks}
    label_warnings = check_labels(data, doc_ids)
    log.info("dataset %s/%s: %d documents, %d chunks, %d queries (fingerprint %s)", data.name,
             data.split, len(doc_ids), len(chunks), len(data.queries), data.fingerprint)

    ecfg = cfg.evaluation
    result = pipe.run({q: x.text for q, x in data.queries.items()}, int(ecfg.retrieve_k),
                      int(ecfg.latency_queries))
    metrics, table = score_split(result.final, pipe.chunks, data, ecfg)
    generator = build.build_generator(cfg)
    if generator is not None:
        t_answer = time.perf_counter()
        answers, rows = answer_queries(data, pipe.chunks, result.final, generator,
                                       build.build_judge(cfg), int(ecfg.answer_k), cache=pipe.cache)
        metrics.update(answers, answer_seconds=time.perf_counter() - t_answer)
        table = with_answers(table, rows)
    metrics.update(n_documents=len(doc_ids), n_chunks=len(chunks))
    metrics.update(runtime_metrics(result, pipe.timings, list(pipe.retrievers)))
    if pipe.cache:
        metrics.update(diff_stats(pipe.cache.stats(), cache_before))
    metrics["total_seconds"] = time.perf_counter() - t_start

    outputs.write_scores(out_dir, metrics, table, data.fingerprint)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    outputs.write_config(out_dir, resolved)  # type: ignore[arg-type]
    fusion = type(pipe.fusion).__name__ if pipe.fusion else None
    title = f"{data.name}/{data.split}  retrievers={list(pipe.retrievers)}  fusion={fusion}"
    print(console.run_summary(title, metrics, list(ecfg.metrics)) + f"\n\n  outputs: {out_dir}")

    tracker = build.build_tracker(cfg)
    if tracker is not None:
        run_id = log_evaluation(
            tracker, resolved=resolved, dataset=data.name, split=data.split,  # type: ignore[arg-type]
            fingerprint=data.fingerprint, retrievers=list(pipe.retrievers), metrics=metrics,
            warnings=[*data.warnings, *label_warnings], out_dir=out_dir,
            run_name=cfg.get("run_name"), sweep=sweep_context())
        (out_dir / outputs.MLFLOW_RUN_FILE).write_text(run_id)
        print(f"  mlflow run: {run_id} ({cfg.tracking.uri})")
    return metrics


if __name__ == "__main__":  # `python -m rag_lab.evaluate ...` = `rag-lab evaluate ...`
    from rag_lab.cli.evaluate import main

    main()
