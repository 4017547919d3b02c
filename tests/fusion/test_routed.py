"""The query router: rules give each query a class, each class fuses with its own weights."""

from __future__ import annotations

import pytest

from rag_lab.fusion import QueryConditioned, RoutedFusion, RRFFusion, Weighted, WeightedFusion
from rag_lab.validate import OptionError

CODE = r"(?<![A-Za-z0-9])[A-Z]{1,2}\d{2,4}(?![A-Za-z0-9])"
ROUTES = {
    "code": {"pattern": CODE, "weights": {"bm25": 1.0, "dense": 0.0}},
    "chinese": {"min_cjk_share": 0.5, "weights": {"bm25": 0.0, "dense": 1.0}},
    "short": {"max_length": 10, "weights": {"bm25": 0.25, "dense": 0.75}},
}
RUNS = {
    "bm25": {"c": {"x": 3.0, "y": 2.0}, "z": {"x": 3.0, "y": 2.0}, "s": {"x": 3.0, "y": 2.0}},
    "dense": {"c": {"y": 0.9, "w": 0.5}, "z": {"y": 0.9, "w": 0.5}, "s": {"y": 0.9, "w": 0.5}},
}
QUERIES = {
    "c": "E102 是什么",
    "z": "油站开不了多久就热",
    "s": "pump hot",
    "n": "a long english question",
}


def test_each_class_gets_its_own_weights() -> None:
    router = RoutedFusion(ROUTES)
    assert isinstance(router, QueryConditioned) and isinstance(router, Weighted)
    assert [router.classify(QUERIES[q]) for q in "czsn"] == ["code", "chinese", "short", "none"]
    out = router.fuse_queries(QUERIES, RUNS, 10)

    def rrf(weights: dict[str, float], q: str) -> dict[str, float]:
        return RRFFusion(60, weights).fuse({n: {q: r[q]} for n, r in RUNS.items()}, 10)[q]

    assert out["c"] == rrf({"bm25": 1.0, "dense": 0.0}, "c")  # code: BM25 alone decides
    assert list(out["c"])[:2] == ["x", "y"]
    assert out["z"] == rrf({"bm25": 0.0, "dense": 1.0}, "z")
    assert list(out["z"])[:2] == ["y", "w"]
    # short: 0.25/61 + 0 for x (bm25 rank 1) vs 0.25/62 + 0.75/61 for y
    assert out["s"]["y"] == pytest.approx(0.25 / 62 + 0.75 / 61)
    assert out["s"]["x"] == pytest.approx(0.25 / 61)
    assert router.stats["share/code"] == pytest.approx(1 / 3)
    assert router.stats["share/none"] == 0.0 and router.stats["ms_per_query"] >= 0
    # each query's class, for per_query.parquet's fusion_route
    assert router.classes == {"c": "code", "z": "chinese", "s": "short"}


def test_an_unmatched_query_and_plain_fuse_weigh_every_retriever_one() -> None:
    router = RoutedFusion(ROUTES, method="weighted", normalization="minmax")
    runs = {n: {"n": r["s"]} for n, r in RUNS.items()}
    plain = WeightedFusion({}, "minmax").fuse(runs, 10)
    assert router.fuse_queries(QUERIES, runs, 10) == plain
    assert router.fuse(runs, 10) == plain
    assert router.stats["share/none"] == 1.0


def test_the_first_matching_route_wins_and_all_conditions_must_hold() -> None:
    router = RoutedFusion(
        {
            "long_zh": {"min_cjk_share": 0.5, "min_length": 8},
            "zh": {"min_cjk_share": 0.5},
            "any": {},
        }
    )
    assert router.classify("油站开不了多久就热") == "long_zh"
    assert router.classify("油站很热") == "zh"
    assert router.classify("HX-200 很热") == "any"  # 2 of 8 characters are Chinese


def test_the_weights_are_the_union_that_the_pipeline_checks() -> None:
    assert RoutedFusion(ROUTES).weights == {"bm25": 0.25, "dense": 0.75}


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ({}, "routes="),
        ({"code": [1]}, "routes.code="),
        ({"code": {"pattern": "("}}, "routes.code.pattern='\\(': not a regex"),
        ({"code": {"max_cjk_share": 2}}, "routes.code.max_cjk_share=2: must be <= 1"),
        ({"code": {"weights": {"bm25": -1}}}, r"routes.code.weights.bm25=-1: must be >= 0"),
        ({"code": {"patern": "E"}}, "routes.code.patern='E': unknown key"),
    ],
)
def test_bad_routes_name_the_key(routes: dict, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        RoutedFusion(routes)


def test_method_is_checked() -> None:
    with pytest.raises(OptionError, match="method='sum'"):
        RoutedFusion(ROUTES, method="sum")
