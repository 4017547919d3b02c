"""Relevance that does not depend on the chunker.

Document level (BEIR convention): a chunk's score counts for its document, a document's score is
its best chunk's score, and documents are de-duplicated before scoring against document qrels.

Evidence level: a retrieved chunk is relevant when its text contains one of the query's gold
answer / evidence strings (after Unicode NFKC, case folding and whitespace collapsing). By default
only chunks of documents judged relevant count, so a number such as "70" appearing in an unrelated
manual is not taken as evidence.
"""

from __future__ import annotations

from collections.abc import Mapping

from rag_lab.ranking import ranked
from rag_lab.text.normalise import normalise_text
from rag_lab.types import Chunk, Qrels, Query, Run

__all__ = ["evidence_qrels", "normalise_text", "ranked", "to_document_run"]  # two re-exported


def to_document_run(run: Run, chunk_doc: Mapping[str, str]) -> Run:
    """Chunk run → document run: each document scored by its best chunk."""
    out: Run = {}
    for qid, scores in run.items():
        docs: dict[str, float] = {}
        for cid, s in scores.items():
            d = chunk_doc[cid]
            if d not in docs or s > docs[d]:
                docs[d] = s
        out[qid] = docs
    return out


def evidence_qrels(
    run: Run,
    chunks: Mapping[str, Chunk],
    queries: Mapping[str, Query],
    qrels: Qrels | None,
    depth: int,
    within_relevant_docs: bool = True,
) -> Qrels:
    """Binary chunk-level labels for the top ``depth`` chunks of each query that has evidence
    strings (``rag_lab.text.normalise_text`` on both sides). Every such query gets an entry, one
    the run lacks or retrieved nothing for included (no labels: scored as a miss, never
    skipped)."""
    out: Qrels = {}
    norm_cache: dict[str, str] = {}
    for qid, q in queries.items():
        if not q.evidence:
            continue
        scores = run.get(qid, {})
        gold = [normalise_text(s) for s in q.evidence]
        allowed = {d for d, g in (qrels or {}).get(qid, {}).items() if g > 0}
        labels: dict[str, int] = {}
        for cid in ranked(scores)[:depth]:
            ch = chunks[cid]
            if within_relevant_docs and qrels is not None and ch.doc_id not in allowed:
                continue
            text = norm_cache.get(cid)
            if text is None:
                text = norm_cache[cid] = normalise_text(ch.text)
            if any(g in text for g in gold):
                labels[cid] = 1
        out[qid] = labels
    return out
