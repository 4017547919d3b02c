"""``category_means`` (numpy slices, issue 36's fixed cost) gives exactly what the pandas loop it
replaced gave: the same keys in the same order and the same floats, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rag_lab.metrics.score import ID_COLUMNS, category_means, score
from rag_lab.types import Chunk, Query


def pandas_means(table: pd.DataFrame) -> dict[str, float]:
    """The replaced implementation: a Series per (category, column)."""
    out: dict[str, float] = {}
    if "category" not in table or not table["category"].notna().any():
        return out
    cols = [c for c in table.columns if c not in ID_COLUMNS]
    for cat, grp in table.groupby("category"):
        for c in cols:
            vals = grp[c].dropna()
            if len(vals):
                out[f"by_category/{cat}/{c}"] = float(vals.mean())
    return out


def same(a: dict[str, float], b: dict[str, float]) -> None:
    assert list(a) == list(b)
    for key in a:
        assert a[key] == b[key] or (math.isnan(a[key]) and math.isnan(b[key])), key


def test_numpy_means_equal_the_pandas_loop_bit_for_bit():
    rng = np.random.default_rng(7)
    n = 500
    ndcg = rng.random(n) / 3.0
    ndcg[rng.random(n) < 0.2] = np.nan  # unanswerable queries: skipped
    only_in_b = np.where(np.arange(n) % 3 == 0, rng.random(n), np.nan)
    table = pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n)],
            "text": ["t"] * n,
            # unsorted, with missing categories (left out) and one category of NaN cells only
            "category": rng.choice(["zeta", "alpha", "b", None, "empty"], n),
            "n_relevant": rng.integers(0, 4, n),
            "ndcg_at_10": ndcg,
            "noise_ratio_at_5": rng.random(n).astype(np.float32),
            "empty_result_rate": rng.integers(0, 2, n),
            "hit": rng.random(n) < 0.5,
            "mixed": [None if i % 4 else 0.1 * i for i in range(n)],
        }
    )
    table.loc[table["category"] == "empty", "ndcg_at_10"] = np.nan
    table.loc[table["category"] != "b", "mixed"] = None
    table["only_b"] = only_in_b
    got = category_means(table)
    same(got, pandas_means(table))
    assert "by_category/empty/ndcg_at_10" not in got
    assert list(got)[0].startswith("by_category/alpha/")  # categories sorted


def test_no_categories_no_keys():
    table = pd.DataFrame({"query_id": ["a", "b"], "category": [None, None], "m": [1.0, 0.0]})
    assert category_means(table) == {} == pandas_means(table)
    assert category_means(table.drop(columns="category")) == {}


def test_the_table_score_builds():
    """A scored run's own per-query table: document and evidence metrics, coverage counts,
    unanswerable queries (NaN noise), three categories and some queries without one."""
    rng = np.random.default_rng(3)
    chunks = {
        f"d{i}#0": Chunk(f"d{i}#0", f"d{i}", f"pump {i} oil {i % 7} bar", 0, 20) for i in range(60)
    }
    queries, qrels, run = {}, {}, {}
    for q in range(90):
        qid = f"q{q:03d}"
        meta = {"answers": [f"oil {q % 7}"]} | ({} if q % 10 == 0 else {"category": "xyz"[q % 3]})
        queries[qid] = Query(qid, f"query {q}", meta)
        qrels[qid] = {f"d{j}": int(q % 5 != 0) for j in rng.choice(60, 3, replace=False)}
        hits = rng.choice(60, int(rng.integers(0, 12)), replace=False)
        run[qid] = {f"d{j}#0": float(rng.random()) for j in hits}
    names = ["ndcg@10", "hit_rate@5", "noise_ratio@5", "recall@100", "mrr@10"]
    flat, table = score(run, chunks, qrels, names, queries=queries)
    got = category_means(table)
    assert any(k.startswith("by_category/x/evidence_") for k in got)
    same(got, pandas_means(table))
    assert {k: v for k, v in flat.items() if k.startswith("by_category/")} == got
