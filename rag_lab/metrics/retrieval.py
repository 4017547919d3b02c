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
from itertools import chain

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
    nothing): bit-for-bit the values of ``query_metrics`` on each query's ``ranked`` list,
    computed for all queries at once (``_Judged``), ~10x faster than the per-query loop
    (``benchmarks/bench_metrics.py``). A run holding a NaN score takes the per-query path (a NaN
    has no place in a sorted order, and ``ranked`` is the rule)."""
    parsed = [parse_metric(n) for n in names]
    qids = list(qrels)
    if not qids or not names:
        return {q: {} for q in qids}
    lists = [run.get(q, {}) for q in qids]
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    flat = np.fromiter(
        chain.from_iterable(r.values() for r in lists), dtype=np.float64, count=int(lengths.sum())
    )
    if np.isnan(flat).any():
        return {
            qid: query_metrics(ranked(run.get(qid, {})), grades, names, open_set)
            for qid, grades in qrels.items()
        }
    judged = _Judged(qids, lists, lengths, flat, qrels, max(k for _, k in parsed))
    cols = [judged.column(metric, k, open_set) for metric, k in parsed]
    rows = np.column_stack(cols).tolist()
    return {qid: dict(zip(names, row)) for qid, row in zip(qids, rows)}


def _exact_row_sums(
    values: np.ndarray, nonzero: np.ndarray, lengths: np.ndarray | None = None
) -> np.ndarray:
    """Row sums bit-for-bit equal to what ``query_metrics`` sums: numpy's ``.sum()`` of each row's
    first ``lengths[i]`` entries, or (``None``) of its non-zero entries (``nonzero[i]`` of them).
    A row with at most two non-zero entries sums exactly in any grouping (``x + 0 == x``, one
    rounding of ``a + b``); the others are summed as ``query_metrics`` does (numpy's pairwise
    grouping depends on the length)."""
    out = values.sum(axis=1)
    for i in np.flatnonzero(nonzero > 2):
        row = values[i]
        out[i] = float(row[: lengths[i]].sum() if lengths is not None else row[row != 0].sum())
    return out


class _Judged:
    """A run reduced to what the metrics read: ``rels[q, i]``, the grade (negatives as 0) of query
    q's rank-i document for ranks below ``kmax``; the number retrieved, the number relevant and
    the ideal (descending) gains per query.

    Only judged documents are placed, nothing is sorted: a judged document's rank in ``ranked``
    order is the number of scores above its own plus the tied ones with a smaller id."""

    def __init__(
        self,
        qids: list[str],
        lists: list[Mapping[str, float]],
        lengths: np.ndarray,
        flat: np.ndarray,
        qrels: Mapping[str, Mapping[str, int]],
        kmax: int,
    ) -> None:
        nq = len(qids)
        self.lengths = lengths
        starts = np.cumsum(lengths) - lengths
        p_row: list[int] = []
        p_score: list[float] = []
        p_grade: list[float] = []
        p_doc: list[str] = []
        pos_grades: list[list[float]] = []
        for i, qid in enumerate(qids):
            grades = qrels[qid]
            pos_grades.append([g for g in grades.values() if g > 0])
            r = lists[i]
            for d, g in grades.items():
                if g > 0 and d in r:  # a judged non-relevant (or negative) one adds nothing
                    p_row.append(i)
                    p_score.append(r[d])
                    p_grade.append(g)
                    p_doc.append(d)
        self.n_rel = np.fromiter(map(len, pos_grades), dtype=np.int64, count=nq)
        gw = max(int(self.n_rel.max()), 1)
        self.ideal = np.array(
            [sorted(g, reverse=True) + [0.0] * (gw - len(g)) for g in pos_grades],
            dtype=np.float64,
        )
        self.rels = np.zeros((nq, kmax))
        if not p_row:
            return
        prow = np.array(p_row)
        ps = np.array(p_score, dtype=np.float64)
        width = int(lengths.max())
        scores = np.full((nq, width), -np.inf)
        row_of = np.repeat(np.arange(nq), lengths)
        scores[row_of, np.arange(len(flat)) - starts[row_of]] = flat
        mine = scores[prow]
        rank = (mine > ps[:, None]).sum(axis=1)
        ties = (mine == ps[:, None]).sum(axis=1)
        for j in np.flatnonzero(ties > 1):  # ties broken by ascending id, as ``ranked``
            ids = list(lists[p_row[j]])
            d = p_doc[j]
            rank[j] += sum(1 for c in np.flatnonzero(mine[j] == ps[j]).tolist() if ids[c] < d)
        keep = rank < kmax
        self.rels[prow[keep], rank[keep]] = np.array(p_grade, dtype=np.float64)[keep]

    def column(self, metric: str, k: int, open_set: bool) -> np.ndarray:
        """One metric for every query, as ``query_metrics`` defines it (same NaN rules)."""
        if not hasattr(self, "_cum"):  # shared by every metric and cut-off
            hits = self.rels > 0
            self._hits = hits
            self._cum = np.cumsum(hits, axis=1)
            self._first = np.where(hits.any(axis=1), np.argmax(hits, axis=1), hits.shape[1])
        n_hit = self._cum[:, k - 1]
        n_ret = np.minimum(self.lengths, k)
        n_rel = self.n_rel
        with np.errstate(invalid="ignore", divide="ignore"):
            if metric == "noise_ratio":
                return np.where(n_ret > 0, (n_ret - n_hit) / n_ret, np.nan)
            if metric == "hit_rate":
                out = (n_hit > 0).astype(np.float64)
            elif metric == "recall":
                out = n_hit / n_rel
            elif metric == "precision":
                out = n_hit / k
            elif metric == "mrr":
                out = np.where(self._first < k, 1.0 / (self._first + 1), 0.0)
            elif metric == "ndcg":
                disc = 1.0 / np.log2(np.arange(2, k + 2))
                # ranks past n_ret hold no grade (zeros); one product per hit is non-zero
                dcg = _exact_row_sums(self.rels[:, :k] * disc, n_hit, n_ret)
                g = self.ideal[:, :k]
                idcg = _exact_row_sums(g * disc[: g.shape[1]], np.minimum(n_rel, k))
                out = dcg / idcg
            else:  # map: precision at each hit, over the number relevant
                prec = self._cum[:, :k] / np.arange(1, k + 1)
                out = _exact_row_sums(np.where(self._hits[:, :k], prec, 0.0), n_hit) / n_rel
        fill = 0.0 if open_set and metric in ("hit_rate", "precision", "mrr") else np.nan
        return np.where(n_rel > 0, out, fill)


def mean_metrics(
    per_query: Mapping[str, Mapping[str, float]], names: Sequence[str]
) -> dict[str, float]:
    """Mean of each metric over the queries where it is defined (NaN skipped)."""
    out = {}
    for name in names:
        vals = np.array([v[name] for v in per_query.values()], dtype=np.float64)
        vals = vals[~np.isnan(vals)]  # the mean of the defined values, in query order
        out[name] = float(np.mean(vals)) if len(vals) else math.nan
    return out
