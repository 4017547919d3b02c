"""``rag-lab evaluate``: build a pipeline from config, run it over a labelled split, report metrics.

Writes ``metrics.json`` and ``per_query.parquet`` into the run directory and logs the same (plus
the flattened config as params, the resolved config and per-query table as artifacts and the
dataset fingerprint as a tag) to one MLflow run. Returns the optimised metric (for sweeps).
"""

from __future__ import annotations

import json
import logging
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import hydra
import numpy as np
from omegaconf import DictConfig, OmegaConf

from rag_lab import PROJECT_ROOT
from rag_lab.cache import diff_stats
from rag_lab.dataset.base import LabelledQueries
from rag_lab.errors import ConfigError, DataError, RagLabError
from rag_lab.metrics import (
    evidence_qrels,
    mean_metrics,
    metric_key,
    ranked,
    run_metrics,
    to_document_run,
)
from rag_lab.pipeline import Pipeline, build_pipeline, instantiate
from rag_lab.types import Run

log = logging.getLogger("rag_lab.evaluate")

EVIDENCE_METRICS = ("hit_rate", "precision", "noise_ratio", "mrr")
# absolute, so the app works from any working directory (a package-relative path would be read as a module)
CONFIG_DIR = str(PROJECT_ROOT / "conf")


def check_labels(data: LabelledQueries, doc_ids: set[str]) -> list[str]:
    """Warn (with counts) about judgments naming documents the corpus lacks; refuse when none match."""
    rows = [(q, d) for q, grades in data.qrels.items() for d in grades]
    unknown = [(q, d) for q, d in rows if d not in doc_ids]
    if unknown and len(unknown) == len(rows):
        raise DataError(f"none of the {len(rows)} judgments in qrels/{data.split}.tsv names a document of the "
                        f"corpus (e.g. {unknown[0][1]!r}): wrong corpus or id field?")
    warnings = []
    if unknown:
        n_q = len({q for q, _ in unknown})
        warnings.append(f"{len(unknown)} of {len(rows)} judgments ({n_q} queries) name documents not in the "
                        f"corpus (e.g. {unknown[0][1]!r}); they stay in the denominators of recall/nDCG")
    for w in warnings:
        log.warning(w)
    return warnings


def score_run(data: LabelledQueries, pipe: Pipeline, final: Run, names: list[str], ecfg: DictConfig):
    """Document-level (and, where the dataset has gold strings, evidence-level) metrics."""
    import pandas as pd

    chunk_doc = {cid: c.doc_id for cid, c in pipe.chunks.items()}
    doc_run = to_document_run(final, chunk_doc)
    per_query = run_metrics(doc_run, data.qrels, names)
    answerable = {q for q, g in data.qrels.items() if any(v > 0 for v in g.values())}
    metrics = mean_metrics(per_query, names)
    ev_names = [f"{m}@{k}" for m in EVIDENCE_METRICS for k in ecfg.evidence_k]
    has_evidence = any(data.queries[q].evidence for q in answerable)
    per_query_ev: dict[str, dict[str, float]] = {}
    if has_evidence:
        depth = max(ecfg.evidence_k)
        ev_qrels = evidence_qrels(final, pipe.chunks, data.queries, data.qrels, depth, ecfg.evidence_within_relevant_docs)
        ev_qrels = {q: labels for q, labels in ev_qrels.items() if q in answerable}
        # labels exist only for retrieved chunks: score the chunk run itself, open-set
        per_query_ev = run_metrics(final, ev_qrels, ev_names, open_set=True)
        metrics.update({f"evidence_{k}": v for k, v in mean_metrics(per_query_ev, ev_names).items()})
    rows = []
    top = max(int(ecfg.report_depth), 1)
    for qid, q in data.queries.items():
        row: dict[str, Any] = {"query_id": qid, "text": q.text, "category": q.category,
                               "n_relevant": sum(1 for g in data.qrels[qid].values() if g > 0)}
        row.update({metric_key(n): v for n, v in per_query[qid].items()})
        row.update({f"evidence_{metric_key(n)}": v for n, v in per_query_ev.get(qid, {}).items()})
        row["retrieved_doc_ids"] = ranked(doc_run.get(qid, {}))[:top]
        row["retrieved_chunk_ids"] = ranked(final.get(qid, {}))[:top]
        rows.append(row)
    table = pd.DataFrame(rows)
    flat = {metric_key(k): v for k, v in metrics.items()}
    if table["category"].notna().any():
        cols = [c for c in table.columns if c not in ("query_id", "text", "category", "n_relevant",
                                                      "retrieved_doc_ids", "retrieved_chunk_ids")]
        for cat, grp in table.groupby("category"):
            for c in cols:
                vals = grp[c].dropna()
                if len(vals):
                    flat[f"by_category/{cat}/{c}"] = float(vals.mean())
    flat["n_queries"] = len(data.queries)
    flat["n_answerable"] = len(answerable)
    flat["n_unanswerable"] = len(data.queries) - len(answerable)
    return flat, table


def sweep_context() -> dict[str, Any] | None:
    """Inside a Hydra multirun job: the parent run written by the sweep callback, this job's number
    and overrides. ``None`` in a single run (or outside Hydra)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
    except Exception:
        return None
    if hc.mode != RunMode.MULTIRUN:
        return None
    parent = Path(hc.sweep.dir) / "sweep_parent.json"
    info = json.loads(parent.read_text()) if parent.exists() else {}
    return {**info, "job": hc.job.num, "overrides": list(hc.overrides.task)}


def check_selection_split(cfg: DictConfig) -> None:
    """A sweep selects a configuration: refuse to do that on the split reserved for reporting."""
    report = OmegaConf.select(cfg, "sweep.report_split", default="test")
    if sweep_context() is not None and cfg.dataset.split == report and \
            not OmegaConf.select(cfg, "sweep.allow_test_selection", default=False):
        raise ConfigError(selection_refusal(cfg.dataset.split))


def selection_refusal(split: str) -> str:
    return (f"a sweep selects a configuration, and dataset.split={split} is the split reserved for reporting "
            f"the winner: sweep on dataset.split=dev (or train), or force it with sweep.allow_test_selection=true")


def format_table(metrics: dict[str, float], keys: list[str]) -> str:
    width = max(len(k) for k in keys)
    return "\n".join(f"  {k:<{width}}  {metrics[k]:.4f}" if isinstance(metrics[k], float) else
                     f"  {k:<{width}}  {metrics[k]}" for k in keys if k in metrics)


def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Run the configured pipeline over the configured split; returns the flat metrics dict."""
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(f"missing required setting(s): {', '.join(missing)} (e.g. {missing[0]}=...)")
    check_selection_split(cfg)
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = list(cfg.evaluation.metrics)
    for n in names:
        try:
            from rag_lab.metrics import parse_metric

            parse_metric(n)
        except ValueError as exc:
            raise ConfigError(f"evaluation.metrics: {exc}") from None
    t_start = time.perf_counter()
    data: LabelledQueries = instantiate(cfg.dataset, "dataset").load()
    pipe = build_pipeline(cfg)
    cache_before = pipe.cache.stats() if pipe.cache else {}
    chunks = pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    doc_ids = {c.doc_id for c in chunks}
    label_warnings = check_labels(data, doc_ids)
    log.info("dataset %s/%s: %d documents, %d chunks, %d queries (fingerprint %s)", data.name, data.split,
             len(doc_ids), len(chunks), len(data.queries), data.fingerprint)
    queries = {q: x.text for q, x in data.queries.items()}
    k, n_lat = int(cfg.evaluation.retrieve_k), int(cfg.evaluation.latency_queries)
    runs, latencies, from_cache = {}, {}, {}
    t0 = time.perf_counter()
    for name in pipe.retrievers:
        runs[name], latencies[name], from_cache[name] = pipe.retriever_run(name, queries, k, n_lat)
    t1 = time.perf_counter()
    final = pipe.combine(queries, runs, k)
    combine_seconds = time.perf_counter() - t1
    metrics, table = score_run(data, pipe, final, names, cfg.evaluation)
    if cfg.get("generator"):
        from rag_lab.answers import answer_queries

        t_ans = time.perf_counter()
        answer_metrics, answer_rows = answer_queries(
            data, pipe.chunks, final, instantiate(cfg.generator, "generator"),
            instantiate(cfg.judge, "judge") if cfg.get("judge") else None,
            int(OmegaConf.select(cfg, "evaluation.answer_k", default=5)), cache=pipe.cache)
        metrics.update(answer_metrics)
        metrics["answer_seconds"] = time.perf_counter() - t_ans
        optional = [c for c in ("context_precision", "context_recall", "judge_error")
                    if any(c in r for r in answer_rows.values())]
        for col in ("response", "faithfulness", "refusal", "exact_match", "f1", "contained", "context_utilisation",
                    *optional):
            table[f"answer_{col}"] = [answer_rows[q].get(col) for q in table["query_id"]]
    # a query's latency: every retriever in turn (as the pipeline runs them), plus its share of fusion
    per_query_ms = np.sum([latencies[n] for n in pipe.retrievers], axis=0) + 1000 * combine_seconds / max(len(queries), 1)
    stats = {f"{name}/{k_}": v for name, r in pipe.retrievers.items() for k_, v in r.stats.items()}
    if pipe.reranker is not None:  # rerank_seconds, ms_per_query, pairs scored vs read from the score cache
        stats.update({f"reranker/{k_}": v for k_, v in getattr(pipe.reranker, "stats", {}).items()})
    metrics.update({
        "n_documents": len(doc_ids), "n_chunks": len(chunks),
        "parse_seconds": pipe.timings.get("parse_seconds", 0.0), "chunk_seconds": pipe.timings.get("chunk_seconds", 0.0),
        "index_seconds": sum(v for k_, v in pipe.timings.items() if k_.endswith("/index_seconds")),
        "retrieve_seconds": t1 - t0, "fuse_seconds": combine_seconds,
        "query_p50_ms": float(np.percentile(per_query_ms, 50)) if np.size(per_query_ms) else math.nan,
        "query_p95_ms": float(np.percentile(per_query_ms, 95)) if np.size(per_query_ms) else math.nan,
        **{f"{name}/run_from_cache": float(v) for name, v in from_cache.items()},
        **stats,
    })
    dense_rates = [v for k_, v in stats.items() if k_.endswith("embed_docs_per_second")]
    metrics["embed_docs_per_second"] = float(statistics.fmean(dense_rates)) if dense_rates else math.nan
    if pipe.cache:
        metrics.update(diff_stats(pipe.cache.stats(), cache_before))
    metrics["total_seconds"] = time.perf_counter() - t_start

    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True, allow_nan=True))
    (out_dir / "dataset_fingerprint").write_text(data.fingerprint)
    table.to_parquet(out_dir / "per_query.parquet", index=False)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    (out_dir / "config_resolved.yaml").write_text(OmegaConf.to_yaml(resolved))

    headline = [metric_key(n) for n in names] + [k for k in metrics if k.startswith(("evidence_", "answer/"))] + \
        ["n_queries", "n_unanswerable", "index_seconds", "query_p50_ms", "query_p95_ms", "embed_docs_per_second",
         "cache_hits", "cache_misses"]
    print(f"\n{data.name}/{data.split}  retrievers={list(pipe.retrievers)}  "
          f"fusion={type(pipe.fusion).__name__ if pipe.fusion else None}\n{format_table(metrics, headline)}")
    cats = sorted({k.split('/')[1] for k in metrics if k.startswith("by_category/")})
    if cats:
        cols = [c for c in ("hit_rate_at_5", "noise_ratio_at_5", "ndcg_at_10") if any(
            f"by_category/{cat}/{c}" in metrics for cat in cats)]
        print("\n  " + f"{'category':<14}" + "".join(f"{c:>18}" for c in cols))
        for cat in cats:
            vals = [metrics.get(f"by_category/{cat}/{c}", math.nan) for c in cols]
            print("  " + f"{cat:<14}" + "".join(f"{v:>18.3f}" for v in vals))
    print(f"\n  outputs: {out_dir}")

    if cfg.get("tracking"):
        tracker = instantiate(cfg.tracking, "tracking")
        run_name = cfg.get("run_name") or f"{data.name}/{data.split} {'+'.join(pipe.retrievers)}"
        tags = {"dataset": data.name, "split": data.split, "dataset_fingerprint": data.fingerprint,
                "retrievers": ",".join(pipe.retrievers)}
        if data.warnings or label_warnings:
            tags["data_warnings"] = " | ".join([*data.warnings, *label_warnings])[:5000]
        sweep = sweep_context()
        params: Any = resolved
        if sweep:  # a child of the sweep's parent run: params = the overrides the sweep varies
            given = dict(o.split("=", 1) for o in sweep["overrides"] if "=" in o)
            params = {k: v for k, v in given.items() if k.lstrip("+~") in sweep.get("swept", given)}
            tags["overrides"] = " ".join(sweep["overrides"])[:5000]
            run_name = cfg.get("run_name") or f"trial {sweep['job']}: " + " ".join(sweep["overrides"])[:200]
        run_id = tracker.log_run(run_name, params, metrics, tags,
                                 {"": out_dir / "config_resolved.yaml", "tables": out_dir / "per_query.parquet",
                                  "metrics": out_dir / "metrics.json"},
                                 parent_run_id=sweep.get("run_id") if sweep else None)
        (out_dir / "mlflow_run_id").write_text(run_id)
        print(f"  mlflow run: {run_id} ({cfg.tracking.uri})")
    return metrics


@hydra.main(config_path=CONFIG_DIR, config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    try:
        metrics = evaluate(cfg)
    except RagLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    opt = cfg.get("optimized_metric")
    return metrics.get(metric_key(opt)) if opt else None


if __name__ == "__main__":
    main()
