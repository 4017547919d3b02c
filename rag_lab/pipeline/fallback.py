"""The fallback chain: when a query's answer is too weak, the next level answers it, and a query
no level accepts is refused.

Level 0 is the pipeline itself; levels 1..L are sub-pipelines, in order (``conf/fallback/``): the
main config with another corpus (a second source, e.g. a public-standards set), a subset of its
retrievers, and with or without its query transforms and post-processors (``BM25 only, no
filters``). Level L+1 is the refusal: an empty run. Each level's ``Acceptance`` decides per query
whether its run is kept:

- an empty run is never accepted (a filter that left nothing falls through);
- ``threshold: null`` accepts every non-empty run;
- otherwise the run's *strength* must reach ``threshold``. Scores differ in scale per pipeline
  (RRF ~1/60, BM25 unbounded, cosine in [-1, 1]), so the default ``score: zscore`` is scale- and
  shift-free: ``(s1 - mean(s1..sn)) / std(s1..sn)`` over the top ``top_n`` scores, how far the best
  stands out of its own list (one number fits every level). ``score: raw`` compares the best score
  itself, in the level's own units: a per-level threshold. ``stage`` judges one named stage's run
  (``bm25``) instead of the level's final run.

Every level runs over the whole query set, through its pipeline's stage cache (the same keys as
any pipeline: a BM25 level over the main corpus replays the main pipeline's BM25 run), so a
threshold sweep re-runs no retriever. Built by ``rag_lab.pipeline.build.build_fallback``; run by
``rag_lab.pipeline.Pipeline.run``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.errors import ConfigError
from rag_lab.ranking import ranked
from rag_lab.validate import OptionError, choice, integer, number

if TYPE_CHECKING:
    from rag_lab.pipeline.pipeline import Pipeline
    from rag_lab.pipeline.result import RetrievalResult
    from rag_lab.types import Qrels, Run

SCORES = ("zscore", "raw")


def zscore(scores: Sequence[float]) -> float:
    """How far the first (best) of ``scores`` stands out: ``(s1 - mean) / std`` (population std);
    0.0 for one score or no spread (nothing stands out)."""
    if len(scores) < 2:
        return 0.0
    mean = sum(scores) / len(scores)
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    return 0.0 if std == 0.0 else (scores[0] - mean) / std


@dataclass(frozen=True)
class Acceptance:
    """When a level's run for a query is kept (see the module docstring).

    Args:
        threshold: the strength a run must reach; ``None`` accepts every non-empty run.
        score: ``zscore`` (scale-free, default) or ``raw`` (the best score, in the level's units).
        stage: the stage whose run is judged (a name of ``RetrievalResult.runs``); ``None`` = the
            level's final run. What the level returns is always its final run.
        top_n: how many of the best scores ``zscore`` reads (``>= 2``).
    """

    threshold: float | None = None
    score: str = "zscore"
    stage: str | None = None
    top_n: int = 20

    def __post_init__(self) -> None:
        if self.threshold is not None:
            number(self.threshold, "threshold")
        choice(self.score, "score", SCORES)
        integer(self.top_n, "top_n", ge=2)

    def strength(self, result: RetrievalResult, qid: str) -> float | None:
        """The judged run's strength for ``qid``; ``None`` when that run is empty."""
        run = result.final if self.stage is None else result.runs.get(self.stage)
        if run is None:
            raise ConfigError(
                f"fallback: stage {self.stage!r} is not a stage of the level "
                f"(stages: {', '.join(result.runs)})"
            )
        scores = run.get(qid) or {}
        if not scores:
            return None
        best = [float(scores[c]) for c in ranked(scores)[: self.top_n]]
        return best[0] if self.score == "raw" else zscore(best)

    def accepts(self, result: RetrievalResult, qid: str) -> bool:
        if not result.final.get(qid):
            return False  # an empty final run (a filter left nothing) always falls through
        value = self.strength(result, qid)
        if value is None:
            return False
        return self.threshold is None or value >= self.threshold


@dataclass
class FallbackLevel:
    """One level: its pipeline (built by ``rag_lab.pipeline.build``), its acceptance, and the corpus
    folder it indexes (``None``: the main pipeline's chunks)."""

    name: str
    pipeline: Pipeline
    accept: Acceptance
    corpus: Path | None = None


@dataclass(frozen=True)
class ChainResult:
    """``final``: each query's run from the level that answered it (empty when refused);
    ``level``: that level's number (0 = the pipeline itself, ``len(levels) + 1`` = refused);
    ``runs``: each level's final run by name (``fallback/<name>``); ``stats``: the counters."""

    final: Run
    level: Mapping[str, int]
    runs: Mapping[str, Run]
    stats: Mapping[str, float]


@dataclass
class FallbackChain:
    """Level 0's acceptance (the pipeline's own run) and the levels after it, in order."""

    accept: Acceptance
    levels: list[FallbackLevel] = field(default_factory=list)

    @property
    def refused_level(self) -> int:
        return len(self.levels) + 1

    def names(self) -> list[str]:
        """Level names by number: ``main``, each level, ``refused``."""
        return ["main", *(lv.name for lv in self.levels), "refused"]

    def resolve(
        self,
        first: RetrievalResult,
        run_level: Callable[[FallbackLevel], RetrievalResult],
        query_ids: Sequence[str],
    ) -> ChainResult:
        """Walk the chain for every query of ``query_ids``: ``first`` is level 0's result,
        ``run_level`` runs a level (called only while some query is still unanswered)."""
        final: Run = {}
        level: dict[str, int] = {}
        pending = []
        for qid in query_ids:
            if self.accept.accepts(first, qid):
                final[qid], level[qid] = dict(first.final[qid]), 0
            else:
                pending.append(qid)
        runs: dict[str, Run] = {}
        for number_, lv in enumerate(self.levels, 1):
            if not pending:
                break
            result = run_level(lv)
            runs[f"fallback/{lv.name}"] = result.final
            still = []
            for qid in pending:
                if lv.accept.accepts(result, qid):
                    final[qid], level[qid] = dict(result.final[qid]), number_
                else:
                    still.append(qid)
            pending = still
        for qid in pending:
            final[qid], level[qid] = {}, self.refused_level
        stats = {
            f"level_{n}": float(sum(1 for v in level.values() if v == n))
            for n in range(self.refused_level + 1)
        }
        return ChainResult(final, level, runs, stats)


def refusal_metrics(final: Run, qrels: Qrels) -> dict[str, float]:
    """Retrieval-level refusals (an empty final run): ``refusal_rate_unanswerable`` (share of the
    unanswerable queries refused, higher is better) and ``wrong_refusal_rate`` (share of the
    answerable ones refused, lower is better); a rate with no query to count is left out."""
    answerable = [q for q, g in qrels.items() if any(v > 0 for v in g.values())]
    unanswerable = [q for q in qrels if q not in set(answerable)]
    out: dict[str, float] = {}
    if unanswerable:
        out["refusal_rate_unanswerable"] = sum(not final.get(q) for q in unanswerable) / len(
            unanswerable
        )
    if answerable:
        out["wrong_refusal_rate"] = sum(not final.get(q) for q in answerable) / len(answerable)
    return out


def acceptance(node: Mapping[str, Any] | None, where: str) -> Acceptance:
    """An ``Acceptance`` from its config mapping; a bad or unknown key is a one-line
    ``ConfigError`` naming ``where``."""
    node = dict(node or {})
    known = {"threshold", "score", "stage", "top_n"}
    unknown = sorted(set(node) - known)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    try:
        return Acceptance(**node)
    except OptionError as exc:
        raise exc.at(where) from None
