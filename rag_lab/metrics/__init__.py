"""Retrieval metrics (document- and evidence-level), checked against ranx in the tests."""

from rag_lab.metrics.relevance import evidence_qrels, normalise_text, ranked, to_document_run
from rag_lab.metrics.retrieval import (
    METRICS,
    mean_metrics,
    metric_key,
    parse_metric,
    query_metrics,
    run_metrics,
)

__all__ = ["METRICS", "evidence_qrels", "mean_metrics", "metric_key", "normalise_text", "parse_metric",
           "query_metrics", "ranked", "run_metrics", "to_document_run"]
