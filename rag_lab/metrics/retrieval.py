"""Per-query retrieval metrics over a ranked run, named as in ranx (``ndcg@10``).

Definitions (``rel(d)`` = qrels grade, relevant iff grade > 0; ranking by score, ties by id):
- ``hit_rate@k``: 1 if any of the top k is relevant.
- ``recall@k``: relevant in top k / all relevant.
- ``precision@k``: relevant in top k / k.
- ``noise_ratio@k``: non-relevant in top k / units retrieved in top k (= 1 − precision@k when k
  units are retrieved); for a query with no relevant unit (unanswerable) every retrieved unit is
  noise. NaN when nothing was retrieved — so it rewards retrieving nothing: read it with
  ``empty_result_rate`` / ``mean_retrieved_at_<k>`` (``rag_lab.metrics.score``), and never
  select or gate on it without a hit-rate or recall floor (``rag_lab.metrics.names``).
- ``mrr@k``: 1 / rank of the first relevant in the top k (0 if none).
- ``ndcg@k``: Σ rel(d_i) / log2(i + 1) over the top k, divided by the same for the ideal
  ordering of all judged grades (linear gain, as trec_eval and ranx).
- ``map@k``: Σ over relevant d_i in the top k of precision@i, divided by the number of relevant.
Ranking metrics are NaN for unanswerable queries (no relevant document), so means skip them; an
answerable query with nothing retrieved scores 0 on every one of them (a miss), as in ranx.
Names are ``<metric>@<k>``; the logged form ``<metric>_at_<k>`` is accepted too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np

from rag_lab.metrics.names import metric_key
from rag_lab.ranking import ranked

__all__ = ["METRICS", "mean_metrics", "metric_key", "parse_metric", "query_metrics", "run_metrics"]

METRICS = ("hit_rate", "recall", "precision", "noise_ratio", "mrr", "ndcg", "map")
_NAME = re.compile(r"([a-z_]+?)(?:@|_at_)([1-9]\d*)")


def parse_metric(name: str) -> tuple[str, int]:
    """``"ndcg@10"`` (or its logged form ``"ndcg_at_10"``) → ``("ndcg", 10)``; ``ValueError``
    naming the known metrics otherwise."""
    m = _NAME.fullmatch(name)
    if not m or m.group(1) not in METRICS:
        raise ValueError(
            f"unknown metric {name!r}; use one of {', '.join(METRICS)} as '<name>@<k>'"
        )
    return m.group(1), int(m.group(2))


def query_metrics(
    ranking: Sequence[str], grades: Mapping[str, int], names: Sequence[str], open_set: bool = False
) -> dict[str, float]:
    """All ``names`` for one query: ``ranking`` is the ranked id list, ``grades`` its judgments.

    ``open_set=True`` is for labels that exist only for retrieved units (evidence level): a query
    with no relevant unit then scores 0 on hit rate, precision and MRR instead of NaN (recall,
    nDCG and MAP, which need the full relevant set, stay NaN)."""
    n_rel = sum(1 for g in grades.values() if g > 0)
    # negative grades (e.g. Touché's -2) count as 0, as in ranx
    rels = np.array([max(grades.get(d, 0), 0) for d in ranking], dtype=np.float64)
    hits = rels > 0
    out: dict[str, float] = {}
    for name in names:
        metric, k = parse_metric(name)
        top_hits = hits[:k]
        n_ret = len(top_hits)
        if metric == "noise_ratio":
            out[name] = float((n_ret - top_hits.sum()) / n_ret) if n_ret else math.nan
            continue
        if n_rel == 0:
            out[name] = 0.0 if open_set and metric in ("hit_rate", "precision", "mrr") else math.nan
            continue
        if metric == "hit_rate":
            out[name] = float(top_hits.any())
        elif metric == "recall":
            out[name] = float(top_hits.sum() / n_rel)
        elif metric == "precision":
            out[name] = float(top_hits.sum() / k)
        elif metric == "mrr":
            first = np.flatnonzero(top_hits)
            out[name] = float(1.0 / (first[0] + 1)) if len(first) else 0.0
        elif metric == "ndcg":
            disc = 1.0 / np.log2(np.arange(2, k + 2))
            dcg = float((rels[:k] * disc[:n_ret]).sum())
            gains = np.array([g for g in grades.values() if g > 0], dtype=np.float64)
            ideal = np.sort(gains)[::-1][:k]
            idcg = float((ideal * disc[: len(ideal)]).sum())
            out[name] = dcg / idcg
        elif metric == "map":
            prec_at_hit = np.cumsum(top_hits)[top_hits] / (np.flatnonzero(top_hits) + 1)
            out[name] = float(prec_at_hit.sum() / n_rel)
    return out


def run_metrics(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    names: Sequence[str],
    open_set: bool = False,
) -> dict[str, dict[str, float]]:
    """Per-query metrics for every query of ``qrels`` (a query missing from the run ranks
    nothing)."""
    return {
        qid: query_metrics(ranked(run.get(qid, {})), grades, names, open_set)
        for qid, grades in qrels.items()
    }


def mean_metrics(
    per_query: Mapping[str, Mapping[str, float]], names: Sequence[str]
) -> dict[str, float]:
    """Mean of each metric over the queries where it is defined (NaN skipped)."""
    out = {}
    for name in names:
        vals = [v[name] for v in per_query.values() if not math.isnan(v[name])]
        out[name] = float(np.mean(vals)) if vals else math.nan
    return out
