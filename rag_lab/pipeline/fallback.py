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

- ``judge: true`` adds a check of the *answer*: the level's run is kept only when the answer the
  generator writes from it is judged faithful (the judge's verdict; ``AnswerCheck``, built from
  the run's ``generator`` and ``judge`` by ``rag_lab.pipeline.build``), so an unfaithful answer
  — or a generator reply that fails its schema — moves the query to the next level.

Every level runs over the whole query set, through its pipeline's stage cache (the same keys as
any pipeline: a BM25 level over the main corpus replays the main pipeline's BM25 run), so a
threshold sweep re-runs no retriever. ``FallbackPipeline`` is a pipeline wrapped in its chain:
it runs itself, then the levels for the queries its acceptance refused. Built by
``rag_lab.pipeline.build.build_fallback``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rag_lab.cache.fingerprints import fingerprint
from rag_lab.errors import ConfigError
from rag_lab.io.files import CorpusFolder, list_corpus_folder
from rag_lab.pipeline.pipeline import Pipeline
from rag_lab.pipeline.result import RetrievalResult
from rag_lab.ranking import ranked
from rag_lab.validate import OptionError, boolean, choice, integer, number

if TYPE_CHECKING:
    from rag_lab.types import Chunk, Qrels, Run

SCORES = ("zscore", "raw")


def zscore(scores: Sequence[float]) -> float:
    """How far the first (best) of ``scores`` stands out: ``(s1 - mean) / std`` (population std);
    0.0 for one score or no spread (nothing stands out)."""
    if len(scores) < 2:
        return 0.0
    mean = sum(scores) / len(scores)
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    return 0.0 if std == 0.0 else (scores[0] - mean) / std


@runtime_checkable
class AnswerCheck(Protocol):
    """Whether the answer to ``query`` written from ``chunks`` (a level's run, best first) is good
    enough to keep that level (``Acceptance.judge``); ``level`` names it (``main`` or a level's
    name) for the check's own counts (``counts``, reported as ``fallback/answers/<key>``)."""

    @property
    def counts(self) -> Mapping[str, int]: ...

    def accepts(self, level: str, query: str, chunks: Sequence[Chunk]) -> bool: ...


@dataclass(frozen=True)
class Acceptance:
    """When a level's run for a query is kept (see the module docstring).

    Args:
        threshold: the strength a run must reach; ``None`` accepts every non-empty run.
        score: ``zscore`` (scale-free, default) or ``raw`` (the best score, in the level's units).
        stage: the stage whose run is judged (a name of ``RetrievalResult.runs``); ``None`` = the
            level's final run. What the level returns is always its final run.
        top_n: how many of the best scores ``zscore`` reads (``>= 2``).
        judge: also require the answer written from the run to be judged faithful
            (``AnswerCheck``; needs a generator and a judge).
    """

    threshold: float | None = None
    score: str = "zscore"
    stage: str | None = None
    top_n: int = 20
    judge: bool = False

    def __post_init__(self) -> None:
        if self.threshold is not None:
            number(self.threshold, "threshold")
        choice(self.score, "score", SCORES)
        integer(self.top_n, "top_n", ge=2)
        boolean(self.judge, "judge")

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
    """Level 0's acceptance (the pipeline's own run) and the levels after it, in order.
    ``probe``: when level 0's acceptance judges a retriever the pipeline does not have (``stage:
    bm25`` on a dense-only pipeline), that retriever alone over the main corpus: its run is
    judged, the pipeline's own run is what level 0 returns."""

    accept: Acceptance
    levels: list[FallbackLevel] = field(default_factory=list)
    probe: Pipeline | None = None

    @property
    def refused_level(self) -> int:
        return len(self.levels) + 1

    def names(self) -> list[str]:
        """Level names by number: ``main``, each level, ``refused``."""
        return ["main", *(lv.name for lv in self.levels), "refused"]

    @property
    def judged(self) -> bool:
        """Whether some level's acceptance asks for the judge's verdict on its answer."""
        return self.accept.judge or any(lv.accept.judge for lv in self.levels)

    def resolve(
        self,
        first: RetrievalResult,
        run_level: Callable[[FallbackLevel], RetrievalResult],
        query_ids: Sequence[str],
        answer_ok: Callable[[FallbackLevel | None, str, Mapping[str, float]], bool] | None = None,
    ) -> ChainResult:
        """Walk the chain for every query of ``query_ids``: ``first`` is level 0's result,
        ``run_level`` runs a level (called only while some query is still unanswered);
        ``answer_ok(level, query id, run)`` checks a kept run's answer where the acceptance asks
        for it (``level`` None: the pipeline itself)."""

        def ok(
            accept: Acceptance, result: RetrievalResult, qid: str, lv: FallbackLevel | None
        ) -> bool:
            if not accept.accepts(result, qid):
                return False
            if not accept.judge:
                return True
            if answer_ok is None:
                raise ConfigError(
                    "fallback: accept.judge=true needs a generator and a judge "
                    "(generator=... judge=...)"
                )
            return answer_ok(lv, qid, result.final[qid])

        final: Run = {}
        level: dict[str, int] = {}
        pending = []
        for qid in query_ids:
            if ok(self.accept, first, qid, None):
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
                if ok(lv.accept, result, qid, lv):
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
    known = {"threshold", "score", "stage", "top_n", "judge"}
    unknown = sorted(set(node) - known)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    try:
        return Acceptance(**node)
    except OptionError as exc:
        raise exc.at(where) from None


@dataclass
class FallbackPipeline(Pipeline):
    """A pipeline with a fallback chain: ``run`` is the pipeline's own run (level 0), then the
    chain's levels for the queries it refused (``FallbackChain.resolve``); ``load_corpus`` loads
    each level's corpus after the main one."""

    chain: FallbackChain | None = None
    answers: AnswerCheck | None = None  # the judge gate (``Acceptance.judge``), set by build

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.chain is None:
            raise ConfigError("fallback: a fallback pipeline needs its chain")

    @property
    def levels(self) -> list[FallbackLevel]:
        assert self.chain is not None
        return self.chain.levels

    def load_corpus(
        self,
        sources: Sequence[Path],
        root: Path,
        corpus_fingerprint: str,
        on_empty: str = "skip",
        left_out: Sequence[tuple[str, str]] = (),
    ) -> list[Chunk]:
        chunks = super().load_corpus(sources, root, corpus_fingerprint, on_empty, left_out)
        for level in self.levels:
            self._load_level(level, on_empty)
        self._load_probe()
        return chunks

    def _load_probe(self) -> None:
        assert self.chain is not None
        if self.chain.probe is not None:  # the main corpus, under the main chunks' cache key
            self.chain.probe.set_chunks(list(self.chunks.values()), self.chunks_key)

    def searched_corpus(self) -> tuple[dict[str, Chunk], str]:
        """The chunks a level without its own corpus searches, and their cache key: the main
        corpus (over routed sources: every source's chunks, ``RoutedFallbackPipeline``)."""
        return self.chunks, self.chunks_key

    def clashes(self, chunks: Mapping[str, Chunk]) -> list[str]:
        """The ids of a level's own ``chunks`` that the searched corpus also holds (refused: an
        id names one chunk)."""
        return sorted(set(chunks) & set(self.searched_corpus()[0]))

    def _load_level(self, level: FallbackLevel, on_empty: str) -> None:
        """A level's corpus: the searched chunks (and their cache key, so the level's runs share
        the main pipeline's keys) or its own folder, parsed and chunked through the cache like
        the main corpus; its chunk ids must not collide with the searched corpus's."""
        sub = level.pipeline
        if level.corpus is None:
            chunks, key = self.searched_corpus()
            sub.set_chunks(list(chunks.values()), key)
            return
        root = Path(level.corpus)
        # listed as a dataset's corpus folder: links out of it, hidden files left out, counted
        listing = list_corpus_folder(root) if root.is_dir() else CorpusFolder(())
        files = list(listing.files)
        if not files:
            raise ConfigError(f"fallback.levels.{level.name}.corpus: no files in {root}")
        left_out = [(str(p), why) for p, why in listing.left_out]
        sub.load_corpus(files, root, fingerprint(files, root=root), on_empty, left_out)
        clash = self.clashes(sub.chunks)
        if clash:
            raise ConfigError(
                f"fallback.levels.{level.name}.corpus: {len(clash)} chunk id(s) also in the main "
                f"corpus (first: {clash[0]}): give its documents other doc_ids"
            )

    def _answer_ok(
        self, queries: Mapping[str, str]
    ) -> Callable[[FallbackLevel | None, str, Mapping[str, float]], bool] | None:
        """The chain's answer check over this pipeline's chunks (a level's own corpus for a level
        that has one); None without a gate."""
        gate = self.answers
        if gate is None:
            return None

        every = self.all_chunks  # chunk ids are unique across the levels (``clashes``)

        def answer_ok(level: FallbackLevel | None, qid: str, run: Mapping[str, float]) -> bool:
            top = [every[c] for c in ranked(run) if c in every]
            return gate.accepts("main" if level is None else level.name, queries[qid], top)

        return answer_ok

    @property
    def all_chunks(self) -> dict[str, Chunk]:
        """The searched corpus's chunks (:meth:`searched_corpus`) plus those of every level with
        its own corpus: what a run through the chain can return."""
        out = dict(self.searched_corpus()[0])
        for level in self.levels:
            if level.corpus is not None:
                out.update(level.pipeline.chunks)
        return out

    def restore(
        self,
        chunks: Sequence[Chunk],
        index_dirs: Mapping[str, Path],
        levels: Mapping[str, tuple[Sequence[Chunk] | None, Mapping[str, Path]]] | None = None,
        **parts: Any,
    ) -> None:
        """The main corpus and indexes, then each level's: ``levels[name]`` is ``(its own chunks,
        or None for the main ones; its retrievers' index folders)`` (an export carries them).
        ``parts``: what the wrapped pipeline's own ``restore`` also takes (routed sources:
        ``sources=``, ``RoutedFallbackPipeline``)."""
        saved = self._check_saved(levels)
        super().restore(chunks, index_dirs, **parts)
        self._restore_levels(saved)

    def _check_saved(
        self, levels: Mapping[str, tuple[Sequence[Chunk] | None, Mapping[str, Path]]] | None
    ) -> dict[str, tuple[Sequence[Chunk] | None, Mapping[str, Path]]]:
        levels = dict(levels or {})
        for level in self.levels:
            if level.name not in levels:
                raise ConfigError(f"fallback.levels.{level.name}: no saved corpus or indexes")
            if (levels[level.name][0] is None) != (level.corpus is None):
                raise ConfigError(
                    f"fallback.levels.{level.name}: its saved corpus does not match its config "
                    f"({'no own' if levels[level.name][0] is None else 'an own'} corpus saved)"
                )
        return levels

    def _restore_levels(
        self, levels: Mapping[str, tuple[Sequence[Chunk] | None, Mapping[str, Path]]]
    ) -> None:
        """Each level's corpus and indexes, once the pipeline's own are restored."""
        searched = list(self.searched_corpus()[0].values())
        for level in self.levels:
            own, dirs = levels[level.name]
            level.pipeline.restore(searched if own is None else own, dirs)
        self._load_probe()  # indexed on first use

    def judged(
        self,
        result: RetrievalResult,
        queries: Mapping[str, str],
        k: int,
        query_metadata: Mapping[str, Mapping[str, Any]] | None,
    ) -> RetrievalResult:
        """What level 0's acceptance reads: the pipeline's own result, with the probe's runs
        when level 0 is judged on a retriever it does not have."""
        assert self.chain is not None
        if self.chain.probe is None:
            return result
        probe = self.chain.probe.run(queries, k, 0, query_metadata)
        return replace(result, runs=MappingProxyType({**probe.runs, **result.runs}))

    def _run(
        self,
        queries: Mapping[str, str],
        k: int | None,
        latency_queries: int,
        query_metadata: Mapping[str, Mapping[str, Any]] | None,
    ) -> RetrievalResult:
        """The pipeline's own run, then each level over the original query texts (its own
        transforms, if it keeps them), through its cache, for the queries still refused
        (``Pipeline.run`` holds the lock around it)."""
        assert self.chain is not None
        k = int(k or self.retrieve_k)
        result = super()._run(queries, k, latency_queries, query_metadata)
        t0, w0 = time.perf_counter(), time.time_ns()
        level_results: dict[str, RetrievalResult] = {}

        def run_level(level: FallbackLevel) -> RetrievalResult:
            level_results[level.name] = level.pipeline.run(queries, k, 0, query_metadata)
            return level_results[level.name]

        judged = self.judged(result, queries, k, query_metadata)
        chain = self.chain.resolve(judged, run_level, list(queries), self._answer_ok(queries))
        # a level's own stage stats are kept under its name; the chain's counters as fallback/...
        stats = dict(result.stats)
        for name, sub in level_results.items():
            stats.update({f"fallback/{name}/{k_}": v for k_, v in sub.stats.items()})
        ms = 1000 * (time.perf_counter() - t0) / max(len(queries), 1)
        stats.update({f"fallback/{k_}": v for k_, v in chain.stats.items()})
        if self.answers is not None:  # the judge gate: answers judged / rejected per level
            gate = self.answers.counts
            stats.update({f"fallback/answers/{k_}": float(v) for k_, v in gate.items()})
        stats["fallback/ms_per_query"] = ms
        seconds = {**result.seconds, "fallback": time.perf_counter() - t0}
        # only the chain's outcome joins the stage runs: a level's run over another corpus is no
        # step of this pipeline's (miss attribution reads the runs as a chain of stages)
        runs = {**result.runs, "fallback": chain.final}
        # each query's annotations come from the level that answered it (none when refused)
        by_level = [result, *(level_results.get(lv.name) for lv in self.levels)]
        notes = {
            qid: source.annotations[qid]
            for qid, n in chain.level.items()
            if n < len(by_level)
            and (source := by_level[n]) is not None
            and qid in source.annotations
        }
        return RetrievalResult(
            result.queries,
            MappingProxyType(runs),
            chain.final,
            result.latency_ms,
            result.from_cache,
            MappingProxyType(seconds),
            MappingProxyType(stats),
            MappingProxyType(dict(chain.level)),
            annotations=MappingProxyType(notes),
            windows=MappingProxyType({**result.windows, "fallback": (w0, time.time_ns())}),
            retriever_ms=result.retriever_ms,
            routes=result.routes,  # over routed sources: level 0's routing
            source_runs=result.source_runs,
        )
