"""rag_lab's retrieval metrics and judges as ``mlflow.genai`` scorers, for a user's own app:
``mlflow.genai.evaluate(data, predict_fn, scorers=[hit_rate(5), ndcg(10), faithfulness(judge)])``
(re-exported as ``rag_lab.mlflow``).

What a scorer reads of a row:

- the retrieved documents, best first: the ``documents`` (ids) of the app's output when it is a
  dict with that key (rag_lab's own traces), else the output documents of the trace's last
  ``RETRIEVER`` span (MLflow's convention: ``mlflow.entities.Document`` dicts); a document's id
  is its ``metadata["doc_uri"]``, else its ``id``; chunks of one document count once, at the
  rank of its best chunk (as ``rag_lab.metrics.relevance.to_document_run``);
- the expected documents, from the row's expectations: ``expected_document_ids`` (a list of
  ids, each relevant with grade 1, or ``{id: grade}``) or MLflow's
  ``expected_retrieved_context`` (``[{"doc_uri": ...}]``).

The numbers are ``rag_lab.metrics.retrieval.query_metrics``' (the definitions there): ``hit_rate``,
``recall``, ``precision``, ``noise_ratio``, ``mrr``, ``ndcg``, ``map`` at ``k``. A row without
expected documents scores ``None`` on the ranking metrics (rag_lab's NaN: means skip it);
``noise_ratio`` is ``None`` when nothing was retrieved.

``faithfulness(judge)``: a rag_lab judge (``rag_lab.judge``: lexical, nli, ragas) scores the
app's answer (the output, or its ``response`` / ``answer`` key) against the retrieved texts (the
``page_content`` of the last ``RETRIEVER`` span's documents, or the output's ``contexts``) for the
question (the input, or its ``query`` / ``question`` key); the value is the faithfulness in
[0, 1], the rationale the unsupported sentences, the source the judge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.judge.base import Judge
from rag_lab.metrics.retrieval import METRICS, query_metrics

__all__ = [
    "faithfulness",
    "hit_rate",
    "map_",
    "mrr",
    "ndcg",
    "noise_ratio",
    "precision",
    "recall",
    "retrieval_scorer",
]

QUERY_KEYS = ("query", "question", "inputs", "input")
ANSWER_KEYS = ("response", "answer", "output", "text")


def _doc_id(doc: Any) -> str | None:
    if isinstance(doc, str):
        return doc
    if isinstance(doc, Mapping):
        meta = doc.get("metadata") or {}
        found = meta.get("doc_uri") if isinstance(meta, Mapping) else None
        found = found or doc.get("doc_uri") or doc.get("id")
        return str(found) if found is not None else None
    return None


def _retriever_docs(trace: Any) -> list[Any]:
    """The output documents of the trace's last RETRIEVER span (by end time); [] without one."""
    if trace is None:
        return []
    from mlflow.entities import SpanType

    spans = sorted(
        trace.search_spans(span_type=SpanType.RETRIEVER), key=lambda s: s.end_time_ns or 0
    )
    out = spans[-1].outputs if spans else None
    return list(out) if isinstance(out, list) else []


def retrieved_ids(outputs: Any, trace: Any) -> list[str]:
    """The retrieved document ids, best first, each once (module docstring)."""
    docs: Sequence[Any]
    if isinstance(outputs, Mapping) and isinstance(outputs.get("documents"), list):
        docs = outputs["documents"]
    else:
        docs = _retriever_docs(trace)
    ids = [i for i in (_doc_id(d) for d in docs) if i is not None]
    return list(dict.fromkeys(ids))


def expected_grades(expectations: Mapping[str, Any] | None) -> dict[str, int]:
    """``{document id: grade}`` of a row's expectations (module docstring); {} when none."""
    exp = dict(expectations or {})
    given = exp.get("expected_document_ids")
    if isinstance(given, Mapping):
        return {str(k): int(v) for k, v in given.items()}
    if isinstance(given, (list, tuple)):
        return {str(d): 1 for d in given}
    context = exp.get("expected_retrieved_context")
    if isinstance(context, (list, tuple)):
        return {i: 1 for i in (_doc_id(d) for d in context) if i is not None}
    return {}


def retrieval_scorer(metric: str, k: int) -> Any:
    """An ``mlflow.genai`` scorer named ``<metric>_at_<k>`` (``hit_rate_at_5``) of
    :data:`rag_lab.metrics.retrieval.METRICS`."""
    from mlflow.genai.scorers import scorer

    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    if int(k) < 1:
        raise ValueError(f"{metric}: k must be >= 1, got {k}")
    name = f"{metric}@{int(k)}"

    def score(
        outputs: Any = None, expectations: dict[str, Any] | None = None, trace: Any = None
    ) -> float | None:
        value = query_metrics(retrieved_ids(outputs, trace), expected_grades(expectations), [name])
        return None if math.isnan(value[name]) else value[name]

    return scorer(score, name=f"{metric}_at_{int(k)}")


def hit_rate(k: int = 5) -> Any:
    return retrieval_scorer("hit_rate", k)


def recall(k: int = 10) -> Any:
    return retrieval_scorer("recall", k)


def precision(k: int = 5) -> Any:
    return retrieval_scorer("precision", k)


def noise_ratio(k: int = 5) -> Any:
    return retrieval_scorer("noise_ratio", k)


def mrr(k: int = 10) -> Any:
    return retrieval_scorer("mrr", k)


def ndcg(k: int = 10) -> Any:
    return retrieval_scorer("ndcg", k)


def map_(k: int = 100) -> Any:
    return retrieval_scorer("map", k)


def _text(value: Any, keys: Sequence[str]) -> str:
    if isinstance(value, Mapping):
        for key in keys:
            if isinstance(value.get(key), str):
                return str(value[key])
        strings = [v for v in value.values() if isinstance(v, str)]
        return strings[0] if strings else ""
    return "" if value is None else str(value)


def contexts_of(outputs: Any, trace: Any) -> list[str]:
    """The texts the answer was given (module docstring)."""
    if isinstance(outputs, Mapping) and isinstance(outputs.get("contexts"), list):
        return [str(c) for c in outputs["contexts"]]
    return [
        str(d.get("page_content", "")) for d in _retriever_docs(trace) if isinstance(d, Mapping)
    ]


def faithfulness(judge: Judge, name: str = "faithfulness") -> Any:
    """An ``mlflow.genai`` scorer: ``judge``'s faithfulness of the app's answer (module
    docstring), as MLflow feedback with the judge as its ``LLM_JUDGE`` source."""
    from mlflow.entities import AssessmentSource, Feedback
    from mlflow.genai.scorers import scorer

    from rag_lab.judge.base import Identified

    source_id = type(judge).__name__
    if isinstance(judge, Identified):
        import hashlib
        import json

        blob = json.dumps(judge.identity, sort_keys=True, default=str).encode()
        source_id += "@" + hashlib.blake2b(blob, digest_size=4).hexdigest()

    def score(inputs: Any = None, outputs: Any = None, trace: Any = None) -> Feedback:
        result = judge.judge(
            _text(inputs, QUERY_KEYS), contexts_of(outputs, trace), _text(outputs, ANSWER_KEYS)
        )
        unsupported = [u.get("sentence", "") for u in result.details.get("unsupported", [])]
        return Feedback(
            name=name,
            value=result.faithfulness,
            rationale="unsupported: " + " | ".join(unsupported) if unsupported else None,
            source=AssessmentSource(source_type="LLM_JUDGE", source_id=source_id),
        )

    return scorer(score, name=name)
