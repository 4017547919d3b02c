"""The answer stage of ``rag-lab evaluate``: generate from each query's retrieved chunks, judge
grounding, score answers. Runs only when ``generator`` is set (``generator=extractive``,
``openai``, ``transformers``).

Per query: the top ``evaluation.answer_k`` chunks of the final run pass the ``context`` stages
(``rag_lab.context``: ordering, near-duplicate removal, budget, distillation; none by default)
and go to the generator, with the query's ``notes`` (e.g. a conflict flag) when it has any; the
judge (``judge=lexical`` | ``nli`` | ``ragas``; none → faithfulness missing) scores the response
against those chunks, through ``JudgeRunner`` (retries, then a missing score; never a silent zero).
Model calls are cached in the stage cache: answers of generators that describe their request
(``Cacheable``, ``request()``: openai, transformers) under ``generations``, verdicts of judges
with an identity (``Identified``: nli, ragas) under ``judge``; a rerun with the same inputs calls
neither again.

Aggregates (``answer/…`` in ``metrics.json`` and MLflow; ``aggregate_answers`` computes them):
- ``faithfulness`` over queries the judge scored (``n_missing_faithfulness`` counts the rest, of
  which ``n_judge_failures`` are judge failures after retries), ``context_utilisation`` over
  non-refusals whose judge reports supported sentences;
- ``context_precision`` / ``context_recall`` when the judge scores them (ragas, with gold answers);
- ``unsupported_fact_rate`` (answers stating a number, date, code, unit or name the chunks lack:
  lower is better) and ``faithful_rate`` (the judge's verdict) when the judge gives them (lexical);
  per query ``unsupported_facts`` and ``faithful``;
- ``exact_match``, ``f1``, ``contained`` over queries with gold answers;
- ``refusal_rate_unanswerable`` (refusals among unanswerable queries: higher is better) and
  ``wrong_refusal_rate`` (refusals among answerable ones: lower is better);
- call counts: ``generator_calls`` / ``generator_cache_hits``, ``judge_calls`` (retries included)
  / ``judge_cache_hits`` / ``judge_retries``; ``n_invalid_outputs``: replies that failed a
  ``generator=structured`` schema twice and were replaced by the refusal (per query
  ``answer_invalid_output``, only when some reply failed);
- ``answer_misses/<reason>`` (``rag_lab.metrics.attribution.answer_miss_reason``, per query
  ``miss_reason``).

The judge scores the answer against the full text of the retrieved chunks that reached the
generator (a distilled chunk is judged by its source, so a distiller that invents a fact shows
as an unfaithful answer). Context size (``context/…``): ``tokens_before`` / ``tokens_after``,
the mean pre-tokens of the numbered blocks before and after the stages (per query
``context_tokens_before`` / ``context_tokens_after``), ``tokens_saved_share`` (1 - total after /
total before), and each measured stage's ``context/<stage>/<stat>``. With a freshness-warning
stage (``context=[age]``): ``stale_chunks_per_query`` and ``queries_with_stale`` (per query
``stale_chunks``: blocks the generator read with a "published N days ago" warning).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.cache import StageCache
from rag_lab.cache.keys import generation_key
from rag_lab.context.age import AgeWarning, stale_count
from rag_lab.context.base import ContextStage
from rag_lab.dataset.base import LabelledQueries
from rag_lab.generator.base import Cacheable, Generator
from rag_lab.generator.context import block_tokens
from rag_lab.generator.structured import InvalidOutputError
from rag_lab.judge.base import Judge, TermAware
from rag_lab.judge.runner import JudgeRunner
from rag_lab.metrics.answers import (
    Golds,
    aggregate_answers,
    answer_contained,
    context_utilisation,
    exact_match,
    token_f1,
)
from rag_lab.metrics.attribution import answer_miss_metrics, answer_miss_reason
from rag_lab.protocols import CacheAware, Measured
from rag_lab.ranking import ranked
from rag_lab.text import ContentTerms
from rag_lab.text.language import detect_language
from rag_lab.text.refusals import REFUSALS, is_refusal
from rag_lab.types import Chunk, Run

GENERATIONS = "generations"


def score_response(
    judge: Judge | None, query: str, contexts: Sequence[str], response: str, reference: Golds | None
) -> dict[str, Any]:
    """Everything rag_lab scores about one answer: faithfulness (``None`` without a judge or when
    the judge could not score), refusal, context utilisation, missing facts / unsupported
    sentences, ``unsupported_facts`` (the facts the contexts lack, None when the judge does not
    check facts) and ``faithful`` (the judge's verdict, None when it gives none), and exact
    match / token F1 / contained when gold answers exist. Judges that score
    the retrieved contexts add ``context_precision`` / ``context_recall``; a judge failure adds
    ``judge_error``. Shared by ``rag-lab judge`` (logged answers) and ``rag-lab evaluate`` with a
    generator. Context utilisation uses the judge's own term analysis when it declares one
    (``rag_lab.judge.base.TermAware``)."""
    refusal = is_refusal(response)
    res = (
        judge.judge(query, list(contexts), response, _first(reference))
        if judge is not None
        else None
    )
    details = res.details if res is not None else {}
    # context utilisation needs the judge's supported sentences; a judge that does not report them
    # (ragas) leaves it missing rather than zero
    supported = details.get("supported_sentences")
    terms = judge.terms if isinstance(judge, TermAware) else None
    row: dict[str, Any] = {
        "faithfulness": res.faithfulness if res is not None else None,
        "refusal": refusal,
        "context_utilisation": None
        if refusal or supported is None
        else context_utilisation(supported, list(contexts), terms=terms),
        "missing_facts": details.get("missing", []),
        "unsupported": [u["sentence"] for u in details.get("unsupported", [])],
        # None when the judge does not check facts (nli, ragas) or could not score
        "unsupported_facts": _fact_texts(details.get("unsupported_facts")),
        "faithful": details.get("faithful"),
    }
    for key in ("context_precision", "context_recall", "error"):
        if key in details:
            row["judge_error" if key == "error" else key] = details[key]
    if reference:
        row |= {
            "exact_match": exact_match(response, reference),
            "f1": token_f1(response, reference),
            "contained": answer_contained(response, reference),
        }
    return row


def _fact_texts(facts: Sequence[Mapping[str, Any]] | None) -> list[str] | None:
    return None if facts is None else list(dict.fromkeys(str(f["fact"]) for f in facts))


def _first(ref: Golds | None) -> str | None:
    if isinstance(ref, (list, tuple)):
        return ref[0] if ref else None
    return ref if isinstance(ref, str) else None


def generate(
    generator: Generator,
    query: str,
    chunks: Sequence[Chunk],
    cache: StageCache | None,
    counts: Counter[str],
    notes: Sequence[str] = (),
) -> str:
    """``generator.generate``, read from / written to the cache when the generator describes its
    request (``rag_lab.generator.base.Cacheable``). ``notes`` are passed only when there are
    some (a generator written before notes existed keeps working without them)."""
    extra = (list(notes),) if notes else ()
    request = (
        generator.request(query, chunks, *extra)
        if cache is not None and isinstance(generator, Cacheable)
        else None
    )
    key = generation_key(request) if request is not None else None
    if key is not None and cache is not None:
        hit = cache.get_json(GENERATIONS, key)
        if hit is not None:
            counts["generator_cache_hits"] += 1
            return str(hit["response"])
    counts["generator_calls"] += 1
    response = generator.generate(query, chunks, *extra)
    if key is not None and cache is not None:
        cache.put_json(GENERATIONS, key, {"response": response})
    return response


def answer_queries(
    data: LabelledQueries,
    chunks: Mapping[str, Chunk],
    final: Run,
    generator: Generator,
    judge: Judge | None,
    k: int,
    cache: StageCache | None = None,
    stages: Mapping[str, ContextStage] | None = None,
    notes: Mapping[str, Sequence[str]] | None = None,
) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """``(aggregate metrics, per-query rows)``; rows carry the response and every per-answer
    score. Aggregates: ``rag_lab.metrics.answers.aggregate_answers`` plus the call counts, all
    prefixed ``answer/``, the answer-side miss counts and the ``context/`` sizes. ``stages``:
    the context stages in order; ``notes``: per query id, lines put before the context."""
    runner = JudgeRunner(judge, cache) if judge is not None else None
    stages = dict(stages or {})
    for stage in stages.values():
        if cache is not None and isinstance(stage, CacheAware):
            stage.attach_cache(cache.view(stage.cache_namespace))
    counts: Counter[str] = Counter()
    stage_ms: dict[str, float] = dict.fromkeys(
        stages, 0.0
    )  # each context stage's wall time over the split
    rows: dict[str, dict[str, Any]] = {}
    # freshness warnings (context=[age]) are counted per query when such a stage runs
    warns = any(isinstance(s, AgeWarning) for s in stages.values())
    terms = ContentTerms()  # the miss reasons' term analysis, built once
    for qid, q in data.queries.items():
        top = [chunks[c] for c in ranked(final.get(qid, {}))[:k]]
        given = top
        w0 = time.time_ns()
        for name, stage in stages.items():
            t0 = time.perf_counter()
            given = stage.apply(q.text, given)
            stage_ms[name] += (time.perf_counter() - t0) * 1000
        w1 = time.time_ns()
        try:
            response = generate(generator, q.text, given, cache, counts, (notes or {}).get(qid, ()))
            invalid = False
        except InvalidOutputError:  # the schema failed twice: the fallback is the refusal
            response, invalid = REFUSALS[detect_language(q.text)], True
            counts["invalid_outputs"] += 1
        w2 = time.time_ns()
        golds = [str(a) for a in (q.metadata.get("answers") or [])]
        # judged against the sources of what the generator read, not a distiller's rewrite
        contexts = [chunks[c.chunk_id].text if c.chunk_id in chunks else c.text for c in given]
        row = score_response(runner, q.text, contexts, response, golds or None)
        # this query's own steps on the wall clock (ns): its trace's spans
        row["windows"] = {
            "context": (w0, w1),
            "generation": (w1, w2),
            "judge": (w2, time.time_ns()),
        }
        row["given_ids"] = [c.chunk_id for c in given]
        row["response"] = response
        if invalid:  # the column appears only where some reply failed (answer_invalid_output)
            row["invalid_output"] = True
        row["contexts"] = contexts  # for the run folder's answers.jsonl
        row["answerable"] = any(g > 0 for g in data.qrels[qid].values())
        language = detect_language(q.text)
        row["context_tokens_before"] = block_tokens(top, language)
        row["context_tokens_after"] = block_tokens(given, language)
        if warns:
            row["stale_chunks"] = stale_count(given)
        row["miss_reason"] = (
            answer_miss_reason(
                q.text,
                response,
                golds,
                q.evidence,
                [c.text for c in given],
                terms,
                retrieved=[c.text for c in top],
            )
            if row["answerable"]
            else ""
        )
        rows[qid] = row
    out = {f"answer/{m}": v for m, v in aggregate_answers(rows.values()).items()}
    out |= answer_miss_metrics(
        {q: r["miss_reason"] for q, r in rows.items()},
        {q: x.category for q, x in data.queries.items()},
    )
    before = sum(r["context_tokens_before"] for r in rows.values())
    after = sum(r["context_tokens_after"] for r in rows.values())
    n = max(len(rows), 1)
    out["context/tokens_before"] = before / n
    out["context/tokens_after"] = after / n
    out["context/tokens_saved_share"] = 1 - after / before if before else 0.0
    if warns:
        stale = [r["stale_chunks"] for r in rows.values()]
        out["context/stale_chunks_per_query"] = sum(stale) / n
        out["context/queries_with_stale"] = float(sum(1 for s in stale if s))
    for name, stage in stages.items():
        if isinstance(stage, Measured):
            out |= {f"context/{name}/{s}": float(v) for s, v in stage.stats.items()}
        out[f"context/{name}/ms_per_query"] = stage_ms[name] / n
    out["answer/generator_calls"] = float(counts["generator_calls"])
    out["answer/generator_cache_hits"] = float(counts["generator_cache_hits"])
    out["answer/n_invalid_outputs"] = float(counts["invalid_outputs"])
    if runner is not None:
        out["answer/n_judge_failures"] = float(runner.counts["failures"])
        for c in ("calls", "cache_hits", "retries"):
            out[f"answer/judge_{c}"] = float(runner.counts[c])
    return out, rows


class JudgedAnswers:
    """The fallback chain's answer check (``rag_lab.pipeline.fallback.AnswerCheck``): write the
    answer from a level's top ``k`` chunks (through the ``context`` stages) as the answer stage
    does — same generator, same cache keys, so the answer stage reads it back from the cache —
    and keep the level when the judge calls it faithful (its verdict, ``details["faithful"]``;
    else faithfulness >= ``threshold``). A refusal, a missing score and a reply that failed its
    schema (``InvalidOutputError``) are not kept. ``counts``: ``<level>/judged``,
    ``<level>/rejected``, ``<level>/invalid``."""

    def __init__(
        self,
        generator: Generator,
        judge: Judge,
        k: int,
        cache: StageCache | None = None,
        stages: Mapping[str, ContextStage] | None = None,
        threshold: float = 1.0,
    ) -> None:
        self.generator, self.k, self.cache = generator, int(k), cache
        self.runner = JudgeRunner(judge, cache)
        self.stages = dict(stages or {})
        self.threshold = float(threshold)
        self.counts: Counter[str] = Counter()

    def accepts(self, level: str, query: str, chunks: Sequence[Chunk]) -> bool:
        given = list(chunks[: self.k])
        for stage in self.stages.values():
            given = stage.apply(query, given)
        self.counts[f"{level}/judged"] += 1
        try:
            response = generate(self.generator, query, given, self.cache, self.counts)
        except InvalidOutputError:
            self.counts[f"{level}/invalid"] += 1
            return False
        res = self.runner.judge(query, [c.text for c in given], response)
        verdict = res.details.get("faithful")
        good = (
            not is_refusal(response)
            and res.faithfulness is not None
            and (bool(verdict) if verdict is not None else res.faithfulness >= self.threshold)
        )
        if not good:
            self.counts[f"{level}/rejected"] += 1
        return good
