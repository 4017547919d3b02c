"""Scoring a run: a pure function of (run, chunks, labels) used by evaluate, export, the gate's
sides, training's dev evaluation and ``rag-lab judge``.

Chunk runs are aggregated to documents (a document scores its best chunk) before the document
metrics; where queries carry gold strings, chunks are also judged by the evidence they hold
(``evidence_*`` metrics, open-set: only retrieved chunks have labels).

An answerable query with nothing retrieved is a miss (0) in hit rate, recall, precision, MRR,
nDCG and MAP, document- and evidence-level; its noise ratio is undefined and skipped, so
``empty_result_rate`` (share of the split's queries with no document retrieved) and
``mean_retrieved_at_<k>`` (documents in the top k, per ``noise_ratio@k``) are reported beside it:
a method that retrieves nothing for the hard queries shows there, not as lower noise.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rag_lab.errors import ConfigError, DataError
from rag_lab.metrics.names import metric_key
from rag_lab.metrics.relevance import evidence_qrels, to_document_run
from rag_lab.metrics.retrieval import mean_metrics, parse_metric, run_metrics
from rag_lab.ranking import ranked
from rag_lab.types import Chunk, LabelledQueries, Qrels, Query, Run

if TYPE_CHECKING:
    import pandas as pd


log = logging.getLogger(__name__)

EVIDENCE_METRICS = ("hit_rate", "precision", "noise_ratio", "mrr")
# per-query table columns that are not metrics
ID_COLUMNS = (
    "query_id",
    "text",
    "category",
    "n_relevant",
    "retrieved_doc_ids",
    "retrieved_chunk_ids",
)


def check_metric_names(names: Sequence[str]) -> None:
    """``ConfigError`` naming ``evaluation.metrics`` for a name that is not ``<metric>@<k>`` (or
    ``<metric>_at_<k>``), or one given twice in two spellings."""
    seen: dict[str, str] = {}
    for n in names:
        try:
            parse_metric(n)
        except ValueError as exc:
            raise ConfigError(f"evaluation.metrics: {exc}") from None
        key = metric_key(n)
        if key in seen:
            raise ConfigError(f"evaluation.metrics: {n!r} and {seen[key]!r} are one metric")
        seen[key] = n


def check_labels(data: LabelledQueries, doc_ids: set[str]) -> list[str]:
    """Warn (with counts) about judgments naming documents the corpus lacks; refuse when none
    match."""
    rows = [(q, d) for q, grades in data.qrels.items() for d in grades]
    unknown = [(q, d) for q, d in rows if d not in doc_ids]
    if unknown and len(unknown) == len(rows):
        raise DataError(
            f"none of the {len(rows)} judgments in qrels/{data.split}.tsv names a "
            f"document of the corpus (e.g. {unknown[0][1]!r}): wrong corpus or id field?"
        )
    warnings = []
    if unknown:
        n_q = len({q for q, _ in unknown})
        warnings.append(
            f"{len(unknown)} of {len(rows)} judgments ({n_q} queries) name documents "
            f"not in the corpus (e.g. {unknown[0][1]!r}); they stay in the denominators "
            "of recall/nDCG"
        )
    for w in warnings:
        log.warning(w)
    return warnings


def score(
    run: Run,
    chunks: Mapping[str, Chunk],
    qrels: Qrels,
    names: Sequence[str],
    *,
    queries: Mapping[str, Query] | None = None,
    evidence_k: Sequence[int] = (1, 5, 10),
    evidence_within_relevant_docs: bool = True,
    report_depth: int = 100,
) -> tuple[dict[str, float], pd.DataFrame]:
    """``(flat metrics, per-query table)`` of a chunk ``run`` against document ``qrels``.

    ``names`` are ranx-style (``ndcg@10``); keys come out logged-style (``ndcg_at_10``), plus
    ``evidence_*`` when ``queries`` carry gold strings, ``by_category/<c>/<key>`` when they have
    categories, and the query counts. The table has one row per query (``queries`` order, else
    ``qrels`` order) with its metrics and the top ``report_depth`` retrieved doc and chunk ids."""
    import pandas as pd

    queries = queries if queries is not None else {q: Query(q, "") for q in qrels}
    chunk_doc = {cid: c.doc_id for cid, c in chunks.items()}
    doc_run = to_document_run(run, chunk_doc)
    per_query = run_metrics(doc_run, qrels, names)
    answerable = {q for q, g in qrels.items() if any(v > 0 for v in g.values())}
    metrics = mean_metrics(per_query, names)
    noise_ks = sorted({k for m, k in map(parse_metric, names) if m == "noise_ratio"})
    coverage = {qid: retrieved_counts(doc_run.get(qid, {}), noise_ks) for qid in queries}
    for col in ("empty_result_rate", *(f"mean_retrieved_at_{k}" for k in noise_ks)):
        vals = [c[col] for c in coverage.values()]
        metrics[col] = sum(vals) / len(vals) if vals else math.nan
    per_query_ev: dict[str, dict[str, float]] = {}
    if any(queries[q].evidence for q in answerable if q in queries):
        ev_names = [f"{m}@{k}" for m in EVIDENCE_METRICS for k in evidence_k]
        ev_qrels = evidence_qrels(
            run, chunks, queries, qrels, max(evidence_k), evidence_within_relevant_docs
        )
        ev_qrels = {q: labels for q, labels in ev_qrels.items() if q in answerable}
        # labels exist only for retrieved chunks: score the chunk run itself, open-set
        per_query_ev = run_metrics(run, ev_qrels, ev_names, open_set=True)
        metrics.update(
            {f"evidence_{k}": v for k, v in mean_metrics(per_query_ev, ev_names).items()}
        )
    top = max(int(report_depth), 1)
    rows = []
    for qid, q in queries.items():
        row: dict[str, Any] = {
            "query_id": qid,
            "text": q.text,
            "category": q.category,
            "n_relevant": sum(1 for g in qrels[qid].values() if g > 0),
        }
        row.update({metric_key(n): v for n, v in per_query[qid].items()})
        row.update({f"evidence_{metric_key(n)}": v for n, v in per_query_ev.get(qid, {}).items()})
        row.update(coverage[qid])
        row["retrieved_doc_ids"] = ranked(doc_run.get(qid, {}))[:top]
        row["retrieved_chunk_ids"] = ranked(run.get(qid, {}))[:top]
        rows.append(row)
    table = pd.DataFrame(rows)
    flat = {metric_key(k): v for k, v in metrics.items()}
    flat.update(category_means(table))
    flat["n_queries"] = len(queries)
    flat["n_answerable"] = len(answerable)
    flat["n_unanswerable"] = len(queries) - len(answerable)
    return flat, table


def category_means(table: pd.DataFrame) -> dict[str, float]:
    """``by_category/<category>/<column>`` means of every metric column of a per-query table
    (NaN skipped; a column without a value in a category has no key there).

    The same numbers, in the same order, as ``grp[c].dropna().mean()`` for each category of
    ``table.groupby("category")`` and each column (``tests/metrics/test_category_means.py``), a
    tenth of its time: one numpy slice per cell instead of a pandas Series (it was a tenth of a
    warm multirun job's CPU)."""
    import numpy as np
    import pandas as pd

    out: dict[str, float] = {}
    if "category" not in table or not table["category"].notna().any():
        return out
    cols = [c for c in table.columns if c not in ID_COLUMNS]
    values = {c: table[c].to_numpy() for c in cols}
    for cat, rows in table.groupby("category").indices.items():  # sorted, NaN category left out
        for c in cols:
            vals = values[c][rows]
            kind = vals.dtype.kind
            if kind == "f":
                vals = vals[~np.isnan(vals)]
                total = vals.sum(dtype=vals.dtype)  # as pandas' nanmean: in the column's dtype
            elif kind in "iu":
                total = vals.sum(dtype=np.float64)
            elif kind == "b":
                total = vals.sum(dtype=np.int64)
            else:  # object (None and numbers): pandas' own mean
                kept = pd.Series(vals).dropna()
                if len(kept):
                    out[f"by_category/{cat}/{c}"] = float(kept.mean())
                continue
            if len(vals):
                count = vals.dtype.type(len(vals)) if kind == "f" else np.float64(len(vals))
                out[f"by_category/{cat}/{c}"] = float(total / count)
    return out


def retrieved_counts(doc_scores: Mapping[str, float], ks: Sequence[int]) -> dict[str, int]:
    """One query's coverage columns, named as their means in ``metrics.json`` (as ``hit_rate_at_5``
    is, so the gate, the leaderboard and comparisons test them per query):
    ``empty_result_rate`` (1 when no document was retrieved, else 0) and ``mean_retrieved_at_<k>``
    (documents in the top k) for each ``k``."""
    n = len(doc_scores)
    out = {"empty_result_rate": int(n == 0)}
    out.update({f"mean_retrieved_at_{k}": min(n, k) for k in ks})
    return out


def score_split(
    run: Run, chunks: Mapping[str, Chunk], data: LabelledQueries, evaluation: Mapping[str, Any]
) -> tuple[dict[str, float], pd.DataFrame]:
    """``score`` with a dataset split and an ``evaluation`` config section (metrics,
    evidence_k, evidence_within_relevant_docs, report_depth)."""
    return score(
        run,
        chunks,
        data.qrels,
        list(evaluation["metrics"]),
        queries=data.queries,
        evidence_k=list(evaluation["evidence_k"]),
        evidence_within_relevant_docs=bool(evaluation["evidence_within_relevant_docs"]),
        report_depth=int(evaluation["report_depth"]),
    )


ANSWER_COLUMNS = (
    "response",
    "faithfulness",
    "refusal",
    "exact_match",
    "f1",
    "contained",
    "context_utilisation",
)
OPTIONAL_ANSWER_COLUMNS = (
    "context_precision",
    "context_recall",
    "judge_error",
    "invalid_output",  # a generator=structured reply that failed its schema twice (True)
    "miss_reason",  # rag_lab.metrics.attribution.answer_miss_reason
    # the context stages' input and output sizes (rag_lab.pipeline.answers)
    "context_tokens_before",
    "context_tokens_after",
    "stale_chunks",  # blocks read with a freshness warning (context=[age])
)


def with_answers(table: pd.DataFrame, rows: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The per-query table plus ``answer_<column>`` of the answer stage's per-query rows (optional
    columns only where some row has them)."""
    out = table.copy()
    optional = [c for c in OPTIONAL_ANSWER_COLUMNS if any(c in r for r in rows.values())]
    for col in (*ANSWER_COLUMNS, *optional):
        out[f"answer_{col}"] = [rows[q].get(col) for q in out["query_id"]]
    return out


def with_annotations(
    table: pd.DataFrame, annotations: Mapping[str, Mapping[str, Any]], names: Sequence[str] = ()
) -> pd.DataFrame:
    """The per-query table plus one column per annotation name (``names``, the configured
    ``Annotating`` stages', and any other the run wrote: ``conflict``): the value as JSON, ``""``
    for a query without one."""
    import json

    out = table.copy()
    for name in dict.fromkeys([*names, *sorted({n for a in annotations.values() for n in a})]):
        out[name] = [
            json.dumps(annotations[q][name], ensure_ascii=False)
            if name in annotations.get(q, {})
            else ""
            for q in out["query_id"]
        ]
    return out


def annotation_metrics(
    annotations: Mapping[str, Mapping[str, Any]], queries: Mapping[str, Query], names: Sequence[str]
) -> dict[str, float]:
    """For each annotation ``name`` (a stage that can write it is configured): ``<name>/n_flagged``
    (queries it was written for) and ``by_category/<c>/<name>/n_flagged``; where queries carry a
    boolean ``expect_<name>`` label, the flag's ``<name>/precision``, ``<name>/recall`` and
    ``<name>/n_labelled`` over those queries (NaN precision when nothing labelled was flagged)."""
    out: dict[str, float] = {}
    for name in names:
        flagged = {q for q in queries if name in annotations.get(q, {})}
        out[f"{name}/n_flagged"] = float(len(flagged))
        for cat in sorted({str(x.category) for x in queries.values() if x.category is not None}):
            in_cat = {q for q, x in queries.items() if x.category == cat}
            out[f"by_category/{cat}/{name}/n_flagged"] = float(len(flagged & in_cat))
        label = f"expect_{name}"
        labelled = {q: bool(x.metadata[label]) for q, x in queries.items() if label in x.metadata}
        if labelled:
            tp = sum(1 for q, want in labelled.items() if want and q in flagged)
            n_flag = sum(1 for q in labelled if q in flagged)
            n_want = sum(labelled.values())
            out[f"{name}/n_labelled"] = float(len(labelled))
            out[f"{name}/precision"] = tp / n_flag if n_flag else math.nan
            out[f"{name}/recall"] = tp / n_want if n_want else math.nan
    return out


# what a label-free run cannot report: ranking and evidence metrics, miss reasons, refusal rates
# and answer scores that need gold labels, the counts of (un)answerable queries, an annotation's
# precision/recall against labels
_NEEDS_LABELS = re.compile(
    r"(^|/)(evidence_)?(hit_rate|recall|precision|noise_ratio|mrr|ndcg|map)_at_\d+$"
    r"|(^|/)(evidence_)?misses_at_\d+/|(^|/)answer_misses/|(^|/)evidence_"
    r"|(^|/)(refusal_rate_unanswerable|wrong_refusal_rate|n_answerable|n_unanswerable)$"
    r"|^answer/(exact_match|f1|contained|context_precision|context_recall)$"
    r"|/(precision|recall|n_labelled)$"
)


def label_free_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """A label-free run's metrics (``LabelledQueries.labelled`` false): every number that needs
    no judgment (empty-result rate, mean retrieved, the judge's faithfulness, timings, counts)
    plus ``<annotation>_rate`` (share of queries an ``Annotating`` stage flagged: ``conflict_rate``)
    and ``fallback_rate`` (share answered by a fallback level or refused), when measured."""
    out = {k: v for k, v in metrics.items() if not _NEEDS_LABELS.search(k)}
    n = float(metrics.get("n_queries") or 0)
    if n:
        for key, flagged in metrics.items():
            name, sep, rest = key.partition("/")
            if sep and rest == "n_flagged" and flagged is not None:
                out[f"{name}_rate"] = float(flagged) / n
        if "fallback/level_0" in metrics:
            out["fallback_rate"] = 1.0 - float(metrics["fallback/level_0"]) / n
    return out
