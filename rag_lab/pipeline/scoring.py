"""A pipeline's run over a labelled split scored: every quality metric and the per-query table,
shared by ``rag-lab evaluate`` and the re-scoring of an export (``evaluate_exported``), so both
report the same numbers for the same pipeline.

``score_result``: the ranking and evidence metrics (``rag_lab.metrics.score``), the miss reasons
(``rag_lab.metrics.attribution``), what ``Annotating`` stages said (conflict pairs), retrieval
refusals and the fallback level of each query. ``answer_result``: the answer stage when the config
has a generator (context stages → generator → judge; ``rag_lab.pipeline.answers``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from rag_lab.access import PRINCIPAL_FIELD, ReadersPolicy, leaks_per_query
from rag_lab.fusion.routed import RoutedFusion
from rag_lab.io import run_folder
from rag_lab.metrics.attribution import attribute, attribution_metrics, with_attribution
from rag_lab.metrics.routing import expected_sources, routing_metrics
from rag_lab.metrics.score import (
    annotation_metrics,
    score_split,
    with_annotations,
    with_answers,
)
from rag_lab.pipeline import build
from rag_lab.pipeline.answers import answer_queries
from rag_lab.pipeline.fallback import refusal_metrics
from rag_lab.pipeline.pipeline import Pipeline
from rag_lab.pipeline.result import RetrievalResult
from rag_lab.pipeline.sources import SourcesPipeline
from rag_lab.postprocess.conflicts import notes_by_query
from rag_lab.protocols import Annotating
from rag_lab.types import LabelledQueries


def score_result(
    result: RetrievalResult, pipe: Pipeline, data: LabelledQueries, evaluation: Mapping[str, Any]
) -> tuple[dict[str, float], pd.DataFrame]:
    """The quality metrics of ``result`` (a run of ``pipe`` over ``data``'s queries) and the
    per-query table. ``evaluation`` is the config's ``evaluation`` section."""
    chunks = pipe.all_chunks  # with a fallback chain: its levels' corpora too
    metrics, table = score_split(result.final, chunks, data, evaluation)
    k_miss = int(evaluation.get("attribution_k", 5))
    retrievers = [r for r in pipe.retrievers if r in result.runs]  # over sources: shared ones
    reasons = attribute(result.runs, retrievers, chunks, data.qrels, data.queries, k_miss)
    metrics.update(attribution_metrics(reasons, data.queries, k_miss))
    table = with_attribution(table, reasons, k_miss)
    # what Annotating stages said per query (conflict pairs): a column each, counted
    stages = [
        s
        for s in [*pipe.retrievers.values(), *pipe.postprocessors.values()]
        if isinstance(s, Annotating)
    ]
    names = [n for s in stages for n in s.annotation_names]
    table = with_annotations(table, result.annotations, names)
    metrics.update(annotation_metrics(result.annotations, data.queries, names))
    metrics.update(refusal_metrics(result.final, data.qrels))
    # permissions: checked whenever a policy is set or a query names a principal (without a
    # policy, against the default one: what would have leaked)
    meta = {q: x.metadata for q, x in data.queries.items()}
    if pipe.access is not None or any(m.get(PRINCIPAL_FIELD) for m in meta.values()):
        runs = {**result.runs, "final": result.final}
        leaks = leaks_per_query(runs, chunks, meta, pipe.access or ReadersPolicy())
        metrics["permission_leaks"] = float(sum(leaks.values()))
        table = table.assign(permission_leaks=table["query_id"].map(leaks).fillna(0).astype(int))
    if result.fallback_level:  # the level that answered each query (rag_lab.pipeline.fallback)
        table = table.assign(fallback_level=table["query_id"].map(dict(result.fallback_level)))
    if isinstance(pipe.fusion, RoutedFusion) and pipe.fusion.classes:  # the query router's class
        classes = pipe.fusion.classes
        table = table.assign(fusion_route=table["query_id"].map(lambda q: classes.get(q, "")))
    if result.routes and isinstance(pipe, SourcesPipeline):  # several sources, routed per query
        metrics, table = _with_routing(result, pipe, data, metrics, table, k_miss)
    searched = pipe.all_chunks if isinstance(pipe, SourcesPipeline) else pipe.chunks
    metrics.update(n_documents=len({c.doc_id for c in searched.values()}), n_chunks=len(searched))
    return metrics, table


def _with_routing(
    result: RetrievalResult,
    pipe: SourcesPipeline,
    data: LabelledQueries,
    metrics: dict[str, float],
    table: pd.DataFrame,
    k: int,
) -> tuple[dict[str, float], pd.DataFrame]:
    """Routing accuracy and per-source hit rates (``rag_lab.metrics.routing``: the router's
    choice, level 0); each query's ``route``, ``sources`` (what its returned run was searched in:
    with a fallback chain, the answering level's, ``SourcesPipeline.searched_at``) and
    ``expected_sources`` (comma-joined) as columns."""
    chunk_doc = {cid: c.doc_id for cid, c in pipe.all_chunks.items()}
    expected = expected_sources(data.queries, data.qrels, pipe.doc_sources())
    routed = {q: r.sources for q, r in result.routes.items()}
    metrics.update(
        routing_metrics(
            routed, dict(result.source_runs), chunk_doc, expected, data.qrels, data.queries, k
        )
    )
    for source in pipe.sources:
        docs = {c.doc_id for c in source.pipeline.chunks.values()}
        metrics[f"sources/{source.name}/n_documents"] = float(len(docs))
        metrics[f"sources/{source.name}/n_chunks"] = float(len(source.pipeline.chunks))
    qids = table["query_id"]
    routes, levels = result.routes, result.fallback_level
    table = table.assign(
        route=qids.map(lambda q: routes[q].route if q in routes else ""),
        sources=qids.map(
            lambda q: (
                ",".join(pipe.searched_at(levels.get(q, 0), routes[q].sources))
                if q in routes
                else ""
            )
        ),
        expected_sources=qids.map(lambda q: ",".join(expected.get(q, ()))),
    )
    return metrics, table


def answer_result(
    cfg: Any,
    data: LabelledQueries,
    pipe: Pipeline,
    result: RetrievalResult,
    metrics: dict[str, float],
    table: pd.DataFrame,
    out_dir: Path | None = None,
) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """The answer stage when ``cfg`` has a generator: its metrics join ``metrics`` and the
    per-query table comes back with its columns (``answers.jsonl`` into ``out_dir`` when given),
    with the per-query rows (``answer_queries``; ``{}`` without a generator). A conflict flag
    reaches the generator as a note before the context."""
    generator = build.build_generator(cfg)
    if generator is None:
        return table, {}
    t0 = time.perf_counter()
    queries = {q: x.text for q, x in data.queries.items()}
    answers, rows = answer_queries(
        data,
        pipe.all_chunks,
        result.final,
        generator,
        build.build_judge(cfg),
        int(cfg.evaluation.answer_k),
        cache=pipe.cache,
        stages=build.build_context_stages(cfg, generator),
        notes=notes_by_query(result.annotations, queries),
    )
    metrics.update(answers, answer_seconds=time.perf_counter() - t0)
    if out_dir is not None:
        run_folder.write_answer_log(Path(out_dir), data.queries, rows)
    return with_answers(table, rows), rows
