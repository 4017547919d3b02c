"""Why an answerable query missed, from what the run already holds (each stage's run, the chunks,
the labels): a pure function, like scoring.

Document level, at cut-off ``k`` (a query hits when a relevant document is in the final top k):
- ``dropped_by:<stage>`` / ``demoted_by:<stage>``: a relevant document was in the top k of the
  stage before and a named stage (``fusion``, a post-processor) removed it from its run, or
  pushed it below k;
- ``replaced_by:fallback`` / ``refused_by:fallback``: level 0 (the pipeline's own last stage) had
  it in its run, and the fallback chain answered the query from a later level whose run lacks it
  in the top k, or refused it (an empty run). A level's run that the chain rejected is not in
  ``runs``, so gold found only by such a level is not seen;
- ``below_k``: it is in the final run, below k;
- ``not_retrieved``: no retriever returned it in its top ``retrieve_k``.

Evidence level (queries with gold answer strings), when no top-k chunk of a relevant document holds
one of them:
- ``evidence_below_k``: a chunk that holds it is in the final run, below k;
- ``evidence_not_retrieved``: a chunk of the corpus holds it, the run does not have that chunk;
- ``evidence_split_across_chunks``: no chunk holds it, but two consecutive chunks of a relevant
  document do together (the chunker cut through it);
- ``evidence_not_in_corpus``: no chunk of a relevant document holds it (a parser lost it — an OCR
  misreading, a dropped table — or the gold string is not in the source).
Hits are ``hit`` / ``evidence_hit``; queries the level does not apply to get ``""``.

Answer level (``answer_miss_reason``, answerable queries with a gold answer and a response; the
answer stage writes it per query as ``answer_miss_reason`` and counts ``answer_misses/<reason>``):
``evidence_not_in_context``, ``evidence_dropped_by_context`` (a context stage removed it),
``refused_despite_context``, ``context_not_used`` (the evidence was in the context, the answer does
not draw on it) and ``wrong_despite_context``; hits are ``answer_hit``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.metrics.relevance import to_document_run
from rag_lab.ranking import ranked
from rag_lab.text.normalise import normalise_text
from rag_lab.types import Chunk, Qrels, Query, Run

FALLBACK = "fallback"  # the stage name of the fallback chain's outcome (``Pipeline.run``)


def _top(run: Run, qid: str, k: int) -> list[str]:
    return ranked(run.get(qid, {}))[:k]


def _document_reason(
    qid: str,
    relevant: set[str],
    doc_runs: Mapping[str, Run],
    chain: Sequence[str],
    retrievers: Sequence[str],
    k: int,
) -> str:
    final = doc_runs[chain[-1]]
    if relevant & set(_top(final, qid, k)):
        return "hit"
    # the sequential stages: the first is fusion (or the one retriever), then post-processors
    heads = {name: relevant & set(_top(doc_runs[name], qid, k)) for name in chain}
    if len(retrievers) > 1 and chain[0] == "fusion" and not heads["fusion"]:
        lost = [r for r in retrievers if relevant & set(_top(doc_runs[r], qid, k))]
        if lost:
            kept = relevant & set(doc_runs["fusion"].get(qid, {}))
            return "demoted_by:fusion" if kept else "dropped_by:fusion"
    for prev, cur in zip(chain, chain[1:]):
        if heads[prev] and not heads[cur]:
            if cur == FALLBACK:
                return _replaced(final, qid)
            present = heads[prev] & set(doc_runs[cur].get(qid, {}))
            return f"demoted_by:{cur}" if present else f"dropped_by:{cur}"
    if relevant & set(final.get(qid, {})):
        return "below_k"
    # level 0 had it below k, and the chain answered from a later level without it (or refused)
    if (
        len(chain) > 1
        and chain[-1] == FALLBACK
        and relevant & set(doc_runs[chain[-2]].get(qid, {}))
    ):
        return _replaced(final, qid)
    return "not_retrieved"


def _replaced(final: Run, qid: str) -> str:
    """The fallback chain replaced level 0's run: with a later level's (``replaced_by``) or with
    the refusal's empty run (``refused_by``)."""
    return f"replaced_by:{FALLBACK}" if final.get(qid) else f"refused_by:{FALLBACK}"


def _evidence_reason(
    q: Query,
    relevant: set[str],
    final: Run,
    chunks: Mapping[str, Chunk],
    by_doc: Mapping[str, list[Chunk]],
    norm: dict[str, str],
    k: int,
) -> str:
    gold = [normalise_text(s) for s in q.evidence]

    def text(c: Chunk) -> str:
        if c.chunk_id not in norm:
            norm[c.chunk_id] = normalise_text(c.text)
        return norm[c.chunk_id]

    holds = [c for d in relevant for c in by_doc.get(d, ()) if any(g in text(c) for g in gold)]
    scores = final.get(q.query_id, {})
    top = set(ranked(scores)[:k])
    if any(c.chunk_id in top for c in holds):
        return "evidence_hit"
    if any(c.chunk_id in scores for c in holds):
        return "evidence_below_k"
    if holds:
        return "evidence_not_retrieved"
    for d in relevant:
        seq = by_doc.get(d, [])
        for a, b in zip(seq, seq[1:]):
            joined = text(a) + " " + text(b)
            if any(g in joined or g in (text(a) + text(b)) for g in gold):
                return "evidence_split_across_chunks"
    return "evidence_not_in_corpus"


def attribute(
    runs: Mapping[str, Run],
    retrievers: Sequence[str],
    chunks: Mapping[str, Chunk],
    qrels: Qrels,
    queries: Mapping[str, Query],
    k: int = 5,
) -> dict[str, dict[str, str]]:
    """``{query_id: {"miss_reason": ..., "evidence_miss_reason": ...}}`` for every query of
    ``qrels``; ``runs`` is ``RetrievalResult.runs`` (pipeline order), ``retrievers`` its
    retriever names."""
    names = list(runs)
    chain = [n for n in names if n not in retrievers] or [names[0]]
    if len(retrievers) == 1 and chain[0] != retrievers[0]:
        chain = [retrievers[0], *chain]
    chunk_doc = {cid: c.doc_id for cid, c in chunks.items()}
    doc_runs = {n: to_document_run(r, chunk_doc) for n, r in runs.items()}
    by_doc: dict[str, list[Chunk]] = {}
    for c in sorted(chunks.values(), key=lambda c: (c.doc_id, c.start, c.chunk_id)):
        by_doc.setdefault(c.doc_id, []).append(c)
    final = runs[chain[-1]]
    norm: dict[str, str] = {}
    out: dict[str, dict[str, str]] = {}
    for qid, labels in qrels.items():
        relevant = {d for d, g in labels.items() if g > 0}
        row = {"miss_reason": "", "evidence_miss_reason": ""}
        if relevant:
            row["miss_reason"] = _document_reason(qid, relevant, doc_runs, chain, retrievers, k)
            q = queries.get(qid)
            if q is not None and q.evidence:
                row["evidence_miss_reason"] = _evidence_reason(
                    q, relevant, final, chunks, by_doc, norm, k
                )
        out[qid] = row
    return out


def attribution_metrics(
    reasons: Mapping[str, Mapping[str, str]], queries: Mapping[str, Query], k: int
) -> dict[str, float]:
    """Counts of each miss reason, overall and per category: ``misses_at_5/below_k``,
    ``evidence_misses_at_5/evidence_not_in_corpus``, ``by_category/<c>/misses_at_5/...``
    (hits are not counted; ``:`` in a reason becomes ``/``)."""
    out: dict[str, float] = {}
    for qid, row in reasons.items():
        q = queries.get(qid)
        cat = q.category if q is not None else None
        for col, prefix in (("miss_reason", "misses"), ("evidence_miss_reason", "evidence_misses")):
            reason = row[col]
            if reason in ("", "hit", "evidence_hit"):
                continue
            key = f"{prefix}_at_{k}/{reason.replace(':', '/')}"
            out[key] = out.get(key, 0.0) + 1
            if cat:
                ckey = f"by_category/{cat}/{key}"
                out[ckey] = out.get(ckey, 0.0) + 1
    return out


def with_attribution(table: Any, reasons: Mapping[str, Mapping[str, str]], k: int) -> Any:
    """The per-query table plus ``miss_reason_at_<k>`` and ``evidence_miss_reason_at_<k>``."""
    out = table.copy()
    for col in ("miss_reason", "evidence_miss_reason"):
        out[f"{col}_at_{k}"] = [reasons.get(q, {}).get(col, "") for q in out["query_id"]]
    return out


# -- answer side --------------------------------------------------------------------------------
ANSWER_MISS_REASONS = (
    "evidence_not_in_context",
    "evidence_dropped_by_context",
    "refused_despite_context",
    "context_not_used",
    "wrong_despite_context",
)


def answer_miss_reason(
    query: str,
    response: str,
    golds: Sequence[str],
    evidence: Sequence[str],
    contexts: Sequence[str],
    terms: Any = None,
    retrieved: Sequence[str] = (),
) -> str:
    """Why an answer to an answerable query missed its gold answer, from the contexts the
    generator read (after the context stages):

    - ``answer_hit``: the answer contains a gold answer (``answer_contained``);
    - ``evidence_dropped_by_context``: no context holds a gold answer or evidence string
      (normalised substring), but one of the ``retrieved`` texts did (the top chunks before the
      context stages): a stage (dedupe, budget, distillation) removed it;
    - ``evidence_not_in_context``: not even the retrieved texts hold one (the retrieval-side
      reasons say where it was lost);
    - ``refused_despite_context``: the evidence was there and the answer is a refusal;
    - ``context_not_used`` (context utilisation): the evidence was there and the answer shares
      no content term, apart from the query's own, with any context holding it;
    - ``wrong_despite_context``: the answer draws on the evidence context but does not contain
      the gold answer.

    ``""`` when it does not apply (no gold answer, no response). ``terms``: a ``ContentTerms``
    (default jieba exact mode)."""
    from rag_lab.metrics.answers import answer_contained
    from rag_lab.text import ContentTerms
    from rag_lab.text.refusals import is_refusal

    if not golds or not response.strip():
        return ""
    if answer_contained(response, list(golds)):
        return "answer_hit"
    gold = [g for g in (normalise_text(s) for s in (*golds, *evidence)) if g]

    def holds(text: str) -> bool:
        return any(g in normalise_text(text) for g in gold)

    holding = [c for c in contexts if holds(c)]
    if not holding:
        dropped = any(holds(c) for c in retrieved)
        return "evidence_dropped_by_context" if dropped else "evidence_not_in_context"
    if is_refusal(response):
        return "refused_despite_context"
    terms = terms or ContentTerms()
    own = set(terms(response)) - set(terms(query))
    if not any(own & set(t) for t in terms.many(holding)):
        return "context_not_used"
    return "wrong_despite_context"


def answer_miss_metrics(
    reasons: Mapping[str, str], categories: Mapping[str, str | None] | None = None
) -> dict[str, float]:
    """``answer_misses/<reason>`` counts (every reason of ``ANSWER_MISS_REASONS``, zeros
    included, so runs compare key by key) and ``by_category/<c>/answer_misses/<reason>`` for
    the reasons a category has; hits and ``""`` are not counted."""
    out = {f"answer_misses/{r}": 0.0 for r in ANSWER_MISS_REASONS}
    for qid, reason in reasons.items():
        if reason in ANSWER_MISS_REASONS:
            out[f"answer_misses/{reason}"] += 1
            cat = (categories or {}).get(qid)
            if cat:
                key = f"by_category/{cat}/answer_misses/{reason}"
                out[key] = out.get(key, 0.0) + 1
    return out
