"""Routing accuracy and per-source hit rates, checked by hand on a few queries."""

from __future__ import annotations

import pytest

from rag_lab.metrics.routing import expected_sources, routing_metrics
from rag_lab.types import Query

DOC_SOURCE = {"m1": "manuals", "m2": "manuals", "t1": "tickets", "s1": "standards"}
CHUNK_DOC = {"m1#0": "m1", "m1#1": "m1", "m2#0": "m2", "t1#0": "t1", "s1#0": "s1"}
QRELS = {
    "a": {"m1": 2, "t1": 1},  # manuals + tickets
    "b": {"s1": 2},  # standards
    "c": {"m2": 2, "t1": 0},  # manuals (a 0 is not relevant)
    "u": {"m1": 0},  # unanswerable: no expected source
}
QUERIES = {
    "a": Query("a", "x", {"category": "code"}),
    "b": Query("b", "x", {"category": "safety"}),
    "c": Query("c", "x", {"category": "code"}),
    "u": Query("u", "x", {"category": "none"}),
}


def test_expected_sources_from_qrels_or_the_metadata():
    got = expected_sources(QUERIES, QRELS, DOC_SOURCE)
    assert got == {"a": ("manuals", "tickets"), "b": ("standards",), "c": ("manuals",), "u": ()}
    labelled = {**QUERIES, "c": Query("c", "x", {"sources": ["tickets"]})}
    assert expected_sources(labelled, QRELS, DOC_SOURCE)["c"] == ("tickets",)


def test_routing_metrics_by_hand():
    routed = {
        "a": ("manuals", "tickets"),  # exact
        "b": ("manuals",),  # wrong: recall 0, precision 0
        "c": ("manuals", "tickets"),  # covers, one in vain: recall 1, precision 0.5
        "u": ("manuals", "tickets", "standards"),
    }
    runs = {
        "manuals": {"a": {"m2#0": 3.0, "m1#1": 2.0}, "c": {"m1#0": 2.0}, "b": {"m1#0": 1.0}},
        "tickets": {"a": {"t1#0": 1.0}, "c": {"t1#0": 1.0}},
        "standards": {"b": {}},  # searched for nothing: a miss
    }
    expected = expected_sources(QUERIES, QRELS, DOC_SOURCE)
    m = routing_metrics(routed, runs, CHUNK_DOC, expected, QRELS, QUERIES, k=1)
    assert m["routing/accuracy"] == pytest.approx(1 / 3)
    assert m["routing/recall"] == pytest.approx((1 + 0 + 1) / 3)
    assert m["routing/precision"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert m["routing/sources_per_query"] == pytest.approx((2 + 1 + 2 + 3) / 4)
    assert m["by_category/code/routing/accuracy"] == pytest.approx(0.5)
    assert m["by_category/safety/routing/recall"] == 0.0
    # manuals: a (top-1 is m2, not relevant to a) and c (m1 not relevant to c): 0 of 2
    assert m["sources/manuals/hit_rate_at_1"] == 0.0
    assert m["sources/manuals/n_expected"] == 2
    assert m["sources/tickets/hit_rate_at_1"] == 1.0  # a: t1 relevant
    assert m["sources/standards/hit_rate_at_1"] == 0.0
    assert m["sources/standards/routed_share"] == pytest.approx(1 / 4)
    m2 = routing_metrics(routed, runs, CHUNK_DOC, expected, QRELS, QUERIES, k=2)
    assert m2["sources/manuals/hit_rate_at_2"] == 0.5  # a: m1#1 at rank 2
