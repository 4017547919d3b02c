"""A trace per evaluated query, built from what the pipeline already recorded (no stage is run
or timed again): plain records that ``rag_lab.tracking.mlflow.MlflowRun.log_traces`` writes.

``tracking.traces``: ``auto`` (default: ``all`` for a single run, ``none`` for a sweep's jobs,
whose trials would each pay for their traces), ``all`` (every query, up to :data:`MAX_TRACES`),
``sample:N`` (the first ``N`` queries of the split, in its order) or ``none``.

A trace (named ``rag_lab query``, tagged ``query_id``, ``category``, ``split``, linked to the run)
holds a span per stage the query went through, in pipeline order: ``query_transforms`` (the
configured transforms, their names in the attributes; the text the retrievers saw), each
retriever as a ``RETRIEVER`` span whose output lists its top :data:`TRACE_DOCS` documents (id,
score, rank, document id and metadata), ``fusion``, each post-processor, ``fallback`` (the level
that answered), ``context``, ``generation`` and ``judge``.

Span times are measured, never invented: the retrieval stages run a batch of queries at once, so
their span is the batch's window on the wall clock (``rag_lab.batch_queries`` says how many
queries shared it); a retriever's own one-query latency is in ``rag_lab.latency_ms`` for the
queries the run timed one at a time (``evaluation.latency_queries``); the answer stages (context,
generation, judge) run query by query and their spans are the query's own.

Assessments (:class:`AssessmentRecord`): ``hit_at_5`` and ``first_relevant_rank`` (document
level, from the final run and the qrels; answerable queries only; ``0`` = no relevant document
retrieved) with source ``rag_lab.metrics@<version>``, and the judge's ``faithfulness`` /
``faithful`` with the judge's name and version as the source (``LLM_JUDGE``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_lab.errors import ConfigError
from rag_lab.metrics.relevance import to_document_run
from rag_lab.pipeline.result import RetrievalResult
from rag_lab.ranking import ranked
from rag_lab.types import Chunk, LabelledQueries

MAX_TRACES = 1000  # tracking.traces=all logs at most this many (the first, in split order)
TRACE_DOCS = 10  # documents listed per retriever span
TEXT_CHARS = 500  # a document's text in a span, cut here
HIT_K = 5
TRACE_NAME = "rag_lab query"
METRICS_SOURCE = "rag_lab.metrics"


@dataclass(frozen=True)
class SpanRecord:
    """One span: ``kind`` is MLflow's span type (``CHAIN``, ``RETRIEVER``, ``RERANKER``, ``LLM``,
    ``EVALUATOR``); times in ns since the epoch."""

    name: str
    kind: str
    start_ns: int
    end_ns: int
    inputs: Any
    outputs: Any
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AssessmentRecord:
    """A feedback on the trace: ``source_type`` ``CODE`` | ``LLM_JUDGE`` | ``HUMAN``."""

    name: str
    value: Any
    source_type: str
    source_id: str
    rationale: str | None = None


@dataclass(frozen=True)
class TraceRecord:
    """A query's trace: the root span first, then its stages' spans (children of the root)."""

    query_id: str
    tags: Mapping[str, str]
    spans: tuple[SpanRecord, ...]
    assessments: tuple[AssessmentRecord, ...] = ()


def selected(setting: Any, query_ids: Sequence[str], sweep: bool = False) -> list[str]:
    """The query ids ``tracking.traces`` asks traces for (module docstring; ``sweep``: this run
    is a sweep's job); ``ConfigError`` naming the key for anything else."""
    text = "none" if setting is None or setting is False else str(setting).strip().lower()
    if text == "auto":
        text = "none" if sweep else "all"
    if text == "none":
        return []
    if text == "all":
        return list(query_ids)[:MAX_TRACES]
    head, _, n = text.partition(":")
    if head == "sample" and n.isdigit() and int(n) >= 1:
        return list(query_ids)[: min(int(n), MAX_TRACES)]
    raise ConfigError(f"tracking.traces={setting}: expected auto, all, sample:N (N >= 1) or none")


def judge_source(judge_cfg: Mapping[str, Any] | None, version: str) -> str | None:
    """``<judge>@<rag_lab version>+<config hash>`` (``lexical@0.5.0+1a2b3c4d``): the judge's name
    (its class, ``LexicalJudge`` → ``lexical``; its model's last path segment when it has one)
    and what version of it scored; ``None`` without a judge."""
    if not judge_cfg:
        return None
    model = judge_cfg.get("model")
    if isinstance(model, str) and model:
        name = model.rstrip("/").rsplit("/", 1)[-1]
    else:
        target = str(judge_cfg.get("_target_", "judge")).rsplit(".", 1)[-1]
        name = target.removesuffix("Judge").lower() or "judge"
    blob = json.dumps(dict(judge_cfg), sort_keys=True, default=str).encode()
    return f"{name}@{version}+{hashlib.blake2b(blob, digest_size=4).hexdigest()}"


def _documents(run: Mapping[str, float], chunks: Mapping[str, Chunk]) -> list[dict[str, Any]]:
    """The top :data:`TRACE_DOCS` of ``run`` as MLflow documents (``id``, ``page_content``,
    ``metadata``: ``doc_uri`` = the document id, ``chunk_id``, ``rank``, ``score``, then the
    chunk's own metadata). The ids lead: MLflow's trace view shows a document as its text and
    the first metadata entry (the rest behind "+N"), so the first is the document id."""
    out = []
    for rank, cid in enumerate(ranked(run)[:TRACE_DOCS], 1):
        chunk = chunks.get(cid)
        meta: dict[str, Any] = {
            "doc_uri": chunk.doc_id if chunk is not None else cid,
            "chunk_id": cid,
            "rank": rank,
            "score": float(run[cid]),
        }
        if chunk is not None:
            meta.update((k, v) for k, v in chunk.metadata.items() if k not in meta)
        text = chunk.text[:TEXT_CHARS] if chunk is not None else ""
        out.append({"id": cid, "page_content": text, "metadata": meta})
    return out


def _first_relevant(doc_ranking: Sequence[str], qrels: Mapping[str, int]) -> int:
    """1-based rank of the first relevant document; 0 when none was retrieved."""
    for rank, doc in enumerate(doc_ranking, 1):
        if qrels.get(doc, 0) > 0:
            return rank
    return 0


def _answer_spans(query: str, row: Mapping[str, Any], judged: bool) -> list[SpanRecord]:
    """The answer stage's spans of one query (its own measured windows)."""
    windows = row.get("windows", {})
    given = list(row.get("given_ids", []))
    response = row.get("response")
    s, e = windows.get("context", (0, 0))
    out = [SpanRecord("context", "CHAIN", s, e, {"query": query}, given)]
    s, e = windows.get("generation", (0, 0))
    out.append(
        SpanRecord("generation", "LLM", s, e, {"query": query, "chunk_ids": given}, response)
    )
    if judged:
        s, e = windows.get("judge", (0, 0))
        verdict = {"faithfulness": row.get("faithfulness"), "faithful": row.get("faithful")}
        out.append(SpanRecord("judge", "EVALUATOR", s, e, {"response": response}, verdict))
    return out


def _assessments(
    qrels: Mapping[str, int],
    doc_ranking: Sequence[str],
    row: Mapping[str, Any] | None,
    judge: str | None,
    metrics_source: str,
) -> tuple[AssessmentRecord, ...]:
    """The retrieval outcome of an answerable query and the judge's verdict (module
    docstring)."""
    out: list[AssessmentRecord] = []
    if any(g > 0 for g in qrels.values()):
        rank = _first_relevant(doc_ranking, qrels)
        out += [
            AssessmentRecord(f"hit_at_{HIT_K}", 0 < rank <= HIT_K, "CODE", metrics_source),
            AssessmentRecord("first_relevant_rank", rank, "CODE", metrics_source),
        ]
    if row is not None and judge is not None and row.get("faithfulness") is not None:
        out.append(AssessmentRecord("faithfulness", float(row["faithfulness"]), "LLM_JUDGE", judge))
        if row.get("faithful") is not None:
            out.append(AssessmentRecord("faithful", bool(row["faithful"]), "LLM_JUDGE", judge))
    return tuple(out)


def build_traces(
    query_ids: Sequence[str],
    result: RetrievalResult,
    data: LabelledQueries,
    chunks: Mapping[str, Chunk],
    retrievers: Sequence[str],
    answers: Mapping[str, Mapping[str, Any]],
    judge: str | None,
    version: str,
) -> list[TraceRecord]:
    """A :class:`TraceRecord` per id of ``query_ids`` (module docstring): ``result`` is the
    pipeline's run over ``data``'s queries, ``chunks`` every chunk it can return, ``retrievers``
    the retriever stages (by name, in order), ``answers`` the answer stage's per-query rows
    (``{}`` without a generator), ``judge`` the judge's source id (:func:`judge_source`)."""
    chunk_doc = {cid: c.doc_id for cid, c in chunks.items()}
    want = set(query_ids)
    doc_run = to_document_run({q: r for q, r in result.final.items() if q in want}, chunk_doc)
    n = len(result.queries)
    timed = {q: i for i, q in enumerate(list(result.queries)[: len(result.latency_ms)])}
    later = [s for s in result.runs if s not in retrievers]
    metrics_source = f"{METRICS_SOURCE}@{version}"
    out = []
    for qid in query_ids:
        query = data.queries[qid]
        seen = result.queries.get(qid, query.text)
        spans: list[SpanRecord] = []
        batch = {"rag_lab.batch_queries": n}
        if "query_transforms" in result.windows and seen != query.text:
            s, e = result.windows["query_transforms"]
            spans.append(
                SpanRecord(
                    "query_transforms", "CHAIN", s, e, {"query": query.text}, {"query": seen}, batch
                )
            )
        for name in retrievers:
            s, e = result.windows.get(name, (0, 0))
            attrs: dict[str, Any] = dict(batch)
            i = timed.get(qid)
            mine = result.retriever_ms.get(name, ())
            if i is not None and i < len(mine):
                attrs["rag_lab.latency_ms"] = round(mine[i], 3)
            attrs["rag_lab.from_cache"] = bool(result.from_cache.get(name, False))
            run = result.runs.get(name, {}).get(qid, {})
            spans.append(
                SpanRecord(name, "RETRIEVER", s, e, {"query": seen}, _documents(run, chunks), attrs)
            )
        for name in later:
            s, e = result.windows.get(name, (0, 0))
            run = result.runs[name].get(qid, {})
            top = [{"id": c, "score": float(run[c])} for c in ranked(run)[:TRACE_DOCS]]
            outputs: Any = top
            attrs = dict(batch)
            if name == "fallback":
                outputs = {"level": result.fallback_level.get(qid, 0), "top": top}
            kind = "RERANKER" if name == "reranker" else "CHAIN"
            spans.append(SpanRecord(name, kind, s, e, {"n_candidates": len(run)}, outputs, attrs))
        row = answers.get(qid)
        response = row.get("response") if row is not None else None
        if row is not None:
            spans += _answer_spans(query.text, row, judge is not None)
        starts = [sp.start_ns for sp in spans if sp.start_ns]
        ends = [sp.end_ns for sp in spans if sp.end_ns]
        top_docs = ranked(doc_run.get(qid, {}))
        root_out: dict[str, Any] = {"documents": top_docs[:TRACE_DOCS]}
        if response is not None:
            root_out["response"] = response
        root_attrs: dict[str, Any] = {"rag_lab.query_id": qid}
        i = timed.get(qid)
        if i is not None:
            root_attrs["rag_lab.latency_ms"] = round(result.latency_ms[i], 3)
        root = SpanRecord(
            TRACE_NAME,
            "CHAIN",
            min(starts, default=0),
            max(ends, default=0),
            {"query": query.text},
            root_out,
            root_attrs,
        )
        assessments = _assessments(data.qrels.get(qid, {}), top_docs, row, judge, metrics_source)
        tags = {"query_id": qid, "category": query.category or "", "split": data.split}
        out.append(TraceRecord(qid, tags, (root, *spans), assessments))
    return out
