"""Retrieval metrics (document- and evidence-level), checked against ranx in the tests; answer
metrics in ``rag_lab.metrics.answers``; metric names, keys and directions in
``rag_lab.metrics.names``.

``ranked`` (``rag_lab.ranking``), ``normalise_text`` (``rag_lab.text``) and ``metric_key``
(``rag_lab.metrics.names``) are re-exported here for the imports that name this package."""

from rag_lab.metrics.names import metric_key
from rag_lab.metrics.relevance import evidence_qrels, to_document_run
from rag_lab.metrics.retrieval import (
    METRICS,
    mean_metrics,
    parse_metric,
    query_metrics,
    run_metrics,
)
from rag_lab.ranking import ranked
from rag_lab.text.normalise import normalise_text

__all__ = [
    "METRICS",
    "evidence_qrels",
    "mean_metrics",
    "metric_key",
    "normalise_text",
    "parse_metric",
    "query_metrics",
    "ranked",
    "run_metrics",
    "to_document_run",
]
