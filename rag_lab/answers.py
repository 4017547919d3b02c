"""The answer stage of ``rag-lab evaluate``: generate from each query's retrieved chunks, judge
grounding, score answers. Runs only when ``generator`` is set (``generator=extractive``).

Per query: the top ``evaluation.answer_k`` chunks of the final run go to the generator; the judge
(``judge=lexical``; none → faithfulness missing) scores the response against those chunks.
Aggregates (``answer/…`` in ``metrics.json`` and MLflow):
- ``faithfulness`` over queries the judge scored (``n_missing_faithfulness`` counts the rest: never
  a silent zero), ``context_utilisation`` over non-refusals;
- ``exact_match``, ``f1``, ``contained`` over queries with gold answers;
- ``refusal_rate_unanswerable`` (refusals among unanswerable queries: higher is better) and
  ``wrong_refusal_rate`` (refusals among answerable ones: lower is better).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rag_lab.answer_metrics import score_response
from rag_lab.dataset.base import LabelledQueries
from rag_lab.metrics.relevance import ranked
from rag_lab.types import Chunk, Run

NUMERIC = ("faithfulness", "context_utilisation", "exact_match", "f1", "contained")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def answer_queries(data: LabelledQueries, chunks: Mapping[str, Chunk], final: Run, generator: Any,
                   judge: Any | None, k: int) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """``(aggregate metrics, per-query rows)``; rows carry the response and every per-answer score."""
    rows: dict[str, dict[str, Any]] = {}
    for qid, q in data.queries.items():
        top = [chunks[c] for c in ranked(final.get(qid, {}))[:k]]
        response = generator.generate(q.text, top)
        golds = [str(a) for a in (q.metadata.get("answers") or [])]
        row = score_response(judge, q.text, [c.text for c in top], response, golds or None)
        row["response"] = response
        row["answerable"] = any(g > 0 for g in data.qrels[qid].values())
        rows[qid] = row
    out: dict[str, float] = {}
    for m in NUMERIC:
        out[f"answer/{m}"] = _mean([float(r[m]) for r in rows.values() if r.get(m) is not None])
    out["answer/n_missing_faithfulness"] = float(sum(r["faithfulness"] is None for r in rows.values()))
    unans = [r["refusal"] for r in rows.values() if not r["answerable"]]
    ans = [r["refusal"] for r in rows.values() if r["answerable"]]
    out["answer/refusal_rate_unanswerable"] = _mean([float(x) for x in unans])
    out["answer/wrong_refusal_rate"] = _mean([float(x) for x in ans])
    return out, rows
