"""A query router: rules put each query in a class, and each class fuses the retrievers' runs
with its own weights (code-like queries lean on BM25, colloquial ones on dense)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rag_lab.fusion.base import Fusion, all_query_ids
from rag_lab.fusion.rrf import RRFFusion
from rag_lab.fusion.weighted import WeightedFusion
from rag_lab.types import Run
from rag_lab.validate import OptionError, choice, integer, number
from rag_lab.validate import weights as check_weight_values

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_CONDITIONS = ("pattern", "min_cjk_share", "max_cjk_share", "min_length", "max_length")
NO_ROUTE = "none"  # the class of a query no route matches: every retriever weighs 1


@dataclass(frozen=True)
class Route:
    """One class: the conditions a query must meet (all of them; none: every query) and the
    fusion its queries get."""

    name: str
    pattern: re.Pattern[str] | None
    min_cjk_share: float | None
    max_cjk_share: float | None
    min_length: int | None
    max_length: int | None
    weights: Mapping[str, float]
    fusion: Fusion

    def matches(self, text: str) -> bool:
        chars = [c for c in text if not c.isspace()]
        share = sum(bool(_CJK.match(c)) for c in chars) / max(len(chars), 1)
        return (
            (self.pattern is None or self.pattern.search(text) is not None)
            and (self.min_cjk_share is None or share >= self.min_cjk_share)
            and (self.max_cjk_share is None or share <= self.max_cjk_share)
            and (self.min_length is None or len(chars) >= self.min_length)
            and (self.max_length is None or len(chars) <= self.max_length)
        )


class RoutedFusion:
    """Args:
    routes: class name → ``{pattern, min_cjk_share, max_cjk_share, min_length, max_length,
        weights}``, tried in order; the first whose conditions all hold takes the query (a route
        with no condition takes every query that reaches it). ``pattern`` is searched in the query
        text; the CJK share is the fraction of the non-space characters that are Chinese; the
        length counts non-space characters. ``weights``: retriever name → weight ``>= 0``
        (missing names weigh 1; 0 leaves that retriever out for the class: a retriever subset).
    method: how each class fuses, ``rrf`` (``k``: rank offset) or ``weighted``
        (``normalization``: ``minmax`` | ``zscore``).
    A query no route takes is fused with every weight 1 (class ``none``).

    Why a fusion and not a query transform or a retriever wrapper: the class decides how runs
    are combined, which is fusion's job, and the retrievers keep running every query (their
    cached runs are shared with unrouted pipelines). Fusion's contract sees only runs, so the
    router declares ``QueryConditioned`` and the pipeline hands it the query texts the
    retrievers saw. ``stats``: the share of queries in each class and the cost per query;
    ``classes``: each query's class in the last run (``per_query.parquet``'s ``fusion_route``).
    """

    def __init__(
        self,
        routes: Mapping[str, Mapping[str, Any]],
        method: str = "rrf",
        k: float = 60.0,
        normalization: str = "minmax",
    ) -> None:
        self.method = choice(method, "method", ("rrf", "weighted"))
        if not isinstance(routes, Mapping) or not routes:
            raise OptionError("routes", routes, "must map class names to their rules and weights")
        self.routes = [self._route(str(n), r, k, normalization) for n, r in routes.items()]
        self.default = self._fusion({}, k, normalization)
        # every retriever a route weighs: the pipeline checks the names before it retrieves
        self.weights = {name: w for r in self.routes for name, w in r.weights.items()}
        self.stats: dict[str, float] = {}
        self.classes: dict[str, str] = {}

    def _fusion(self, weights: Any, k: float, normalization: str) -> Fusion:
        if self.method == "rrf":
            return RRFFusion(k, weights)
        return WeightedFusion(weights, normalization)

    def _route(self, name: str, spec: Any, k: float, normalization: str) -> Route:
        if not isinstance(spec, Mapping):
            raise OptionError(f"routes.{name}", spec, "must be a mapping of rules and weights")
        unknown = set(spec) - {*_CONDITIONS, "weights"}
        if unknown:
            raise OptionError(
                f"routes.{name}.{sorted(unknown)[0]}",
                spec[sorted(unknown)[0]],
                f"unknown key (keys: {', '.join([*_CONDITIONS, 'weights'])})",
            )
        where = f"routes.{name}"
        pattern = None
        if spec.get("pattern") is not None:
            try:
                pattern = re.compile(str(spec["pattern"]))
            except re.error as exc:
                raise OptionError(
                    f"{where}.pattern", spec["pattern"], f"not a regex ({exc})"
                ) from None
        shares = {
            key: None if spec.get(key) is None else number(spec[key], f"{where}.{key}", ge=0, le=1)
            for key in ("min_cjk_share", "max_cjk_share")
        }
        lengths = {
            key: None if spec.get(key) is None else integer(spec[key], f"{where}.{key}", ge=0)
            for key in ("min_length", "max_length")
        }
        weights = check_weight_values(spec.get("weights"), f"{where}.weights")
        return Route(
            name,
            pattern,
            shares["min_cjk_share"],
            shares["max_cjk_share"],
            lengths["min_length"],
            lengths["max_length"],
            weights,
            self._fusion(weights, k, normalization),
        )

    def classify(self, text: str) -> str:
        """The class of a query text: the first route that takes it, else ``none``."""
        return next((r.name for r in self.routes if r.matches(text)), NO_ROUTE)

    def fuse_queries(self, queries: Mapping[str, str], runs: Mapping[str, Run], k: int) -> Run:
        t0 = time.perf_counter()
        by_name = {r.name: r.fusion for r in self.routes}
        classes: dict[str, list[str]] = {}
        for qid in all_query_ids(runs):
            classes.setdefault(self.classify(queries.get(qid, "")), []).append(qid)
        self.classes = {q: name for name, qids in classes.items() for q in qids}
        fused: Run = {}
        for name, qids in classes.items():
            part = {r: {q: run[q] for q in qids if q in run} for r, run in runs.items()}
            fused.update(by_name.get(name, self.default).fuse(part, k))
        n = sum(map(len, classes.values()))
        self.stats = {
            **{f"share/{r}": len(classes.get(r, ())) / max(n, 1) for r in [*by_name, NO_ROUTE]},
            "ms_per_query": 1000 * (time.perf_counter() - t0) / max(n, 1),
        }
        return {q: fused[q] for q in all_query_ids(runs)}

    def fuse(self, runs: Mapping[str, Run], k: int) -> Run:
        """Every query as class ``none`` (no texts to route on)."""
        return self.default.fuse(runs, k)
