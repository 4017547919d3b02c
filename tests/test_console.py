"""What evaluate prints: absent stages (NaN) left out, counts as integers, CJK aligned."""

from __future__ import annotations

import math

from wcwidth import wcswidth

from rag_lab import console


def test_nan_values_are_left_out_and_counts_are_integers():
    metrics = {
        "ndcg_at_10": 0.5,
        "embed_docs_per_second": math.nan,
        "cache_hits": 3.0,
        "n_queries": 66,
        "query_p50_ms": 1.25,
    }
    text = console.format_table(
        metrics,
        [
            "ndcg_at_10",
            "embed_docs_per_second",
            "cache_hits",
            "n_queries",
            "query_p50_ms",
            "absent",
        ],
    )
    assert "embed_docs_per_second" not in text and "nan" not in text and "absent" not in text
    assert "  cache_hits    3\n" in text + "\n" and "0.5000" in text and "1.2500" in text


def test_chinese_category_names_line_up():
    metrics = {
        "by_category/口语/ndcg_at_10": 0.25,
        "by_category/exact_code/ndcg_at_10": 0.9,
        "by_category/安全规程/hit_rate_at_5": math.nan,
        "by_category/安全规程/ndcg_at_10": 0.5,
    }
    lines = console.category_table(metrics).splitlines()
    assert len(lines) == 4
    assert len({wcswidth(line) for line in lines}) == 1  # every row as wide on screen as the header
    assert lines[-1].split()[1] == "-"  # a missing value is a dash, not nan
