"""``evaluate(cfg)``: build a pipeline from config, run it over a labelled split, score it, write
the run folder and log it. The recipe only orchestrates; each step is a library function.

Writes ``metrics.json``, ``per_query.parquet``, ``dataset_fingerprint`` and
``config_resolved.yaml`` into ``paths.output_dir`` and logs the same (plus params, tags, the
dataset as the run's input and the per-query table) to the configured tracker, whose run is open
for the whole job (``rag_lab.tracking.evaluation``). The CLI entry point is
``rag_lab.cli.evaluate``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from rag_lab import report
from rag_lab.analysis.runs import Labels
from rag_lab.cache import ON_ERROR, open_cache
from rag_lab.errors import ConfigError
from rag_lab.io import run_folder as outputs
from rag_lab.metrics.names import canonical_key
from rag_lab.metrics.relevance import to_document_run
from rag_lab.metrics.score import (
    check_labels,
    check_metric_names,
    label_free_metrics,
)
from rag_lab.pipeline import build
from rag_lab.pipeline.ingest import ingest_metrics
from rag_lab.pipeline.runtime import runtime_metrics
from rag_lab.pipeline.scoring import answer_result, score_result
from rag_lab.protocols import Remote
from rag_lab.report import console
from rag_lab.report.figures import cached_in
from rag_lab.sweep.context import check_sweep, sweep_context
from rag_lab.tracking.evaluation import (
    evaluation_run,
    log_evaluation,
    page_url,
    start_query_traces,
)
from rag_lab.tracking.traces import selected as selected_traces
from rag_lab.validate import OptionError, boolean, check_added_keys, choice, integer

if TYPE_CHECKING:
    import pandas as pd

    from rag_lab.dataset.base import LabelledQueries
    from rag_lab.pipeline.pipeline import Pipeline
    from rag_lab.protocols import TrackedRun

log = logging.getLogger("rag_lab.evaluate")


HTML_REPORT = ("auto", "true", "false")


def wants_html_report(ecfg: DictConfig) -> bool:
    """``evaluation.html_report``: ``auto`` writes ``report.html`` for a single run only (a sweep's
    jobs are on the sweep's own report, and a page per job would cost each job ~1 s)."""
    value = str(ecfg.get("html_report", "auto")).lower()
    return value == "true" or (value == "auto" and sweep_context() is None)


def _overrides() -> list[str]:
    """The job's command-line overrides (none when Hydra did not start the job: a test's
    composed config)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    return [str(o) for o in HydraConfig.get().overrides.task]


def check_config(cfg: DictConfig) -> None:
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(
            f"missing required setting(s): {', '.join(missing)} (e.g. {missing[0]}=...)"
        )
    check_added_keys(cfg, _overrides())  # +evaluation.retrive_k=5 is a typo, not a new setting
    check_sweep(cfg)
    check_metric_names(list(cfg.evaluation.metrics))
    ecfg = cfg.evaluation
    try:  # the numbers of the run itself (stages check their own when they are built)
        integer(ecfg.latency_queries, "latency_queries", ge=0)
        integer(ecfg.report_depth, "report_depth", ge=0)
        integer(ecfg.answer_k, "answer_k", ge=1)
        choice(str(ecfg.get("html_report", "auto")).lower(), "html_report", HTML_REPORT)
        integer(ecfg.get("attribution_k", 5), "attribution_k", ge=1)
        boolean(ecfg.evidence_within_relevant_docs, "evidence_within_relevant_docs")
        for i, k in enumerate(ecfg.evidence_k):
            integer(k, f"evidence_k[{i}]", ge=1)
    except OptionError as exc:
        raise exc.at("evaluation") from None
    selected_traces(OmegaConf.select(cfg, "tracking.traces", default=None), [])  # a bad value
    cache_dir = OmegaConf.select(cfg, "cache.dir", default=None)
    on_error = OmegaConf.select(cfg, "cache.on_error", default="fail")
    try:
        choice(on_error, "on_error", ON_ERROR)
    except OptionError as exc:
        raise exc.at("cache") from None
    if cache_dir:
        # the process-wide cache of cache.dir, opened here with its fault policy: the pipeline
        # built next gets this object; an unwritable folder is refused (or bypassed) up front
        open_cache(cache_dir, on_error=on_error)


def load(cfg: DictConfig) -> tuple[LabelledQueries, Pipeline, list[str]]:
    """Build the dataset and the pipeline, load (parse, chunk) the corpus; label warnings."""
    data = build.build_dataset(cfg).load()
    pipe = build.build_pipeline(cfg, data)  # the corpus decides tokenizer=auto
    chunks = pipe.load_corpus(
        data.corpus_sources,
        data.corpus_root,
        data.corpus_fingerprint,
        data.on_empty,
        data.corpus_left_out,
    )
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
    return data, pipe, [*pipe.corpus_warnings, *check_labels(data, doc_ids)]


def track(
    cfg: DictConfig,
    run: TrackedRun | None,
    tracker: Any,
    data: LabelledQueries,
    pipe: Pipeline,
    metrics: dict[str, float],
    warnings: list[str],
    table: pd.DataFrame,
    out_dir: Path,
) -> None:
    """Log the finished evaluation on the job's open ``run`` (none with ``tracking=none``)."""
    if run is None:
        return
    log_evaluation(
        run,
        data=data,
        source=str(OmegaConf.select(cfg, "dataset.path", default=None) or data.corpus_root),
        retrievers=list(pipe.retrievers),
        metrics=metrics,
        warnings=[*data.warnings, *warnings],
        table=table,
        out_dir=out_dir,
        objective=canonical_key(str(cfg.get("optimized_metric") or "")) or None,
    )
    where = tracker.uri if isinstance(tracker, Remote) else ""
    console.show_tracking(cfg, run.run_id, where, page_url(run) if where else None)


def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Run the configured pipeline over the configured split; returns the flat metrics dict.
    The tracker's run is open from the start of the job to its end (FAILED if it raises)."""
    check_config(cfg)
    t_start = time.perf_counter()
    tracker = build.build_tracker(cfg)
    if isinstance(tracker, Remote):  # a dead server fails in seconds, before any work
        tracker.check()
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    resolved: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    outputs.write_config(out_dir, resolved)  # first: a run that fails still has its config
    with evaluation_run(tracker, cfg, resolved, out_dir, sweep_context()) as run:
        data, pipe, warnings = load(cfg)
        ecfg = cfg.evaluation
        queries = {q: x.text for q, x in data.queries.items()}
        result = pipe.run(
            queries,
            None,  # the pipeline's depth: evaluation.retrieve_k
            int(ecfg.latency_queries),
            query_metadata={q: x.metadata for q, x in data.queries.items()},  # as_of, ...
        )
        metrics, table = score_result(result, pipe, data, ecfg)
        table, answers = answer_result(cfg, data, pipe, result, metrics, table, out_dir)
        traces = None
        if run is not None:  # a trace per query (tracking.traces), written while the job goes on
            traces = start_query_traces(
                run,
                cfg,
                result,
                data,
                pipe.all_chunks,
                list(pipe.retrievers),
                answers,
                sweep=sweep_context() is not None,
            )
        try:
            metrics = _finish(
                cfg, run, tracker, data, pipe, result, metrics, table, warnings, out_dir, t_start
            )
        except BaseException:
            if traces is not None:
                traces.cancel()
            raise
        if traces is not None:
            traces.finish()
    return metrics


def _finish(
    cfg: DictConfig,
    run: TrackedRun | None,
    tracker: Any,
    data: LabelledQueries,
    pipe: Pipeline,
    result: Any,
    metrics: dict[str, float],
    table: pd.DataFrame,
    warnings: list[str],
    out_dir: Path,
    t_start: float,
) -> dict[str, float]:
    """The job after scoring: its timings and counters, its files, report, console summary and
    tracked run; returns the final metrics."""
    ecfg = cfg.evaluation
    metrics.update(runtime_metrics(result, pipe.timings, list(pipe.retrievers)))
    metrics.update(pipe.cache_counters())
    metrics.update(pipe.corpus_counts)
    metrics.update(ingest_metrics(pipe.ingest))
    metrics["total_seconds"] = time.perf_counter() - t_start
    if not data.labelled:  # a label-free query set (dataset.labels=false)
        metrics = label_free_metrics(metrics)

    outputs.write_scores(out_dir, metrics, table, data.fingerprint)
    chunk_doc = {cid: c.doc_id for cid, c in pipe.all_chunks.items()}
    outputs.write_trec_run(out_dir, to_document_run(result.final, chunk_doc), "rag_lab")
    outputs.write_trec_qrels(out_dir, data.qrels)
    if pipe.ingest:
        outputs.write_ingest_report(out_dir, pipe.ingest)
    if wants_html_report(ecfg):
        with cached_in(OmegaConf.select(cfg, "cache.dir", default=None)):  # plots by content
            report.write_run_report(out_dir, Labels(pipe.all_chunks, data.queries, data.qrels))
    console.show_run(
        cfg, console.title(data.name, data.split, pipe), metrics, list(ecfg.metrics), out_dir
    )
    track(cfg, run, tracker, data, pipe, metrics, warnings, table, out_dir)
    return metrics
