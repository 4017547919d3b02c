"""The answer stage of ``rag-lab evaluate``: generate from each query's retrieved chunks, judge
grounding, score answers. Runs only when ``generator`` is set (``generator=extractive``,
``openai``, ``transformers``).

Per query: the top ``evaluation.answer_k`` chunks of the final run go to the generator; the judge
(``judge=lexical`` | ``nli`` | ``ragas``; none → faithfulness missing) scores the response against
those chunks, through ``JudgeRunner`` (retries, then a missing score; never a silent zero).
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
  / ``judge_cache_hits`` / ``judge_retries``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.cache import StageCache
from rag_lab.cache.keys import generation_key
from rag_lab.dataset.base import LabelledQueries
from rag_lab.generator.base import Cacheable, Generator
from rag_lab.judge.base import Judge
from rag_lab.judge.runner import JudgeRunner
from rag_lab.metrics.answers import aggregate_answers, score_response
from rag_lab.ranking import ranked
from rag_lab.types import Chunk, Run

GENERATIONS = "generations"


def generate(
    generator: Generator,
    query: str,
    chunks: Sequence[Chunk],
    cache: StageCache | None,
    counts: Counter[str],
) -> str:
    """``generator.generate``, read from / written to the cache when the generator describes its
    request (``rag_lab.generator.base.Cacheable``)."""
    request = (
        generator.request(query, chunks)
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
    response = generator.generate(query, chunks)
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
) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """``(aggregate metrics, per-query rows)``; rows carry the response and every per-answer
    score. Aggregates: ``rag_lab.metrics.answers.aggregate_answers`` plus the call counts, all
    prefixed ``answer/``."""
    runner = JudgeRunner(judge, cache) if judge is not None else None
    counts: Counter[str] = Counter()
    rows: dict[str, dict[str, Any]] = {}
    for qid, q in data.queries.items():
        top = [chunks[c] for c in ranked(final.get(qid, {}))[:k]]
        response = generate(generator, q.text, top, cache, counts)
        golds = [str(a) for a in (q.metadata.get("answers") or [])]
        row = score_response(runner, q.text, [c.text for c in top], response, golds or None)
        row["response"] = response
        row["contexts"] = [c.text for c in top]  # for the run folder's answers.jsonl
        row["answerable"] = any(g > 0 for g in data.qrels[qid].values())
        rows[qid] = row
    out = {f"answer/{m}": v for m, v in aggregate_answers(rows.values()).items()}
    out["answer/generator_calls"] = float(counts["generator_calls"])
    out["answer/generator_cache_hits"] = float(counts["generator_cache_hits"])
    if runner is not None:
        out["answer/n_judge_failures"] = float(runner.counts["failures"])
        for c in ("calls", "cache_hits", "retries"):
            out[f"answer/judge_{c}"] = float(runner.counts[c])
    return out, rows
