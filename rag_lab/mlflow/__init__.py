"""rag_lab for MLflow 3 users: rag_lab's retrieval metrics and judges as ``mlflow.genai``
scorers (``rag_lab.tracking.scorers``)::

    import mlflow
    from rag_lab.mlflow import faithfulness, hit_rate, ndcg

    mlflow.genai.evaluate(data, predict_fn, scorers=[hit_rate(5), ndcg(10), faithfulness(judge)])
"""

from __future__ import annotations

from rag_lab.tracking.scorers import (
    faithfulness,
    hit_rate,
    map_,
    mrr,
    ndcg,
    noise_ratio,
    precision,
    recall,
    retrieval_scorer,
)

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
