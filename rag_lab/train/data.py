"""Training data from a labelled split: (query, positive chunk, mined hard negatives).

The same parser and chunker as the pipeline produce the chunks, so a model is trained on the units
it will later embed or rerank. Hard negatives come from the configured retrievers (BM25 and/or
dense, fused when several): the chunks ranked highest for a query that do not belong to any
document labelled relevant for it. A leakage guard refuses to train on queries that also appear
(by id or by normalised text) in an evaluation split.
"""

from __future__ import annotations

import logging
import random
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rag_lab.dataset.base import LabelledQueries
from rag_lab.errors import DataError
from rag_lab.ranking import ranked
from rag_lab.types import Chunk, Run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingExample:
    """One (query, positive) pair with its hard negatives (texts as the retriever indexes them)."""

    query_id: str
    query: str
    positive_id: str
    positive: str
    negative_ids: tuple[str, ...]
    negatives: tuple[str, ...]


def normalise_query(text: str) -> str:
    """Text identity for the leakage guard: NFKC, case-folded, punctuation and spacing removed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return re.sub(r"[\W_]+", " ", text).strip()


def find_leakage(train: LabelledQueries, others: Sequence[LabelledQueries]) -> dict[str, list[str]]:
    """Train query ids that also occur in another split, by id or by normalised text:
    ``{"<split>": [train query ids]}`` (empty when clean)."""
    out: dict[str, list[str]] = {}
    for other in others:
        texts = {normalise_query(q.text) for q in other.queries.values()}
        hits = [
            qid
            for qid, q in train.queries.items()
            if qid in other.queries or normalise_query(q.text) in texts
        ]
        if hits:
            out[other.split] = sorted(hits)
    return out


def leakage_guard(
    train: LabelledQueries, others: Sequence[LabelledQueries], mode: str = "error"
) -> set[str]:
    """Refuse (``mode="error"``) or drop (``mode="drop"``, returned ids) train queries that leak
    into an evaluation split. ``others`` must not contain the training split itself."""
    if mode not in ("error", "drop"):
        raise ValueError(f"train.leakage must be error or drop, got {mode!r}")
    for other in others:
        if other.split == train.split:
            raise DataError(
                f"train.eval_splits names the training split {train.split!r} itself: "
                "a model cannot be evaluated on the queries it was trained on"
            )
    leaks = find_leakage(train, others)
    if not leaks:
        return set()
    desc = "; ".join(
        f"{len(ids)} also in split {s!r} (e.g. {ids[0]!r}: {train.queries[ids[0]].text[:60]!r})"
        for s, ids in leaks.items()
    )
    if mode == "error":
        raise DataError(
            f"leakage: of {len(train.queries)} training queries in "
            f"qrels/{train.split}.tsv, {desc} (same id or identical text); remove "
            "them, or set train.leakage=drop to train without them"
        )
    dropped = set().union(*map(set, leaks.values()))
    log.warning("leakage guard: dropping %d training queries: %s", len(dropped), desc)
    return dropped


def split_dev(query_ids: Sequence[str], fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """Deterministic hold-out of ``fraction`` of the queries for dev evaluation (train, dev)."""
    ids = sorted(query_ids)
    if fraction <= 0:
        return ids, []
    rng = random.Random(seed)
    rng.shuffle(ids)
    n_dev = max(1, round(len(ids) * fraction)) if len(ids) > 1 else 0
    return sorted(ids[n_dev:]), sorted(ids[:n_dev])


def positives_of(qrels: Mapping[str, Mapping[str, int]], qid: str) -> set[str]:
    return {d for d, g in qrels.get(qid, {}).items() if g > 0}


def positive_chunks(
    query: str,
    evidence: Sequence[str],
    doc_ids: set[str],
    by_doc: Mapping[str, list[Chunk]],
    ranking: Sequence[str],
) -> list[Chunk]:
    """The chunk of each relevant document that answers the query: the one holding a gold evidence
    string when the query has some, else the best-ranked by the mining retrievers (``ranking``),
    else the first."""
    rank = {cid: i for i, cid in enumerate(ranking)}
    out = []
    for doc_id in sorted(doc_ids):
        chunks = by_doc.get(doc_id, [])
        if not chunks:
            continue
        with_ev = [c for c in chunks if any(e in c.text for e in evidence)]
        pool = with_ev or chunks
        out.append(min(pool, key=lambda c: (rank.get(c.chunk_id, len(rank)), c.start)))
    return out


def build_examples(
    data: LabelledQueries,
    query_ids: Sequence[str],
    chunks: Mapping[str, Chunk],
    mined: Run,
    num_negatives: int,
    depth: int = 30,
    skip_top: int = 0,
    sampling: str = "random",
    seed: int = 0,
) -> list[TrainingExample]:
    """One example per (query, relevant document). Negatives: chunks from the mined run's top
    ``depth`` (in ``rag_lab.ranking.ranked`` order, after skipping ``skip_top``), never from a
    document labelled relevant for that query; ``sampling`` ``top`` takes the hardest, ``random``
    draws from that pool (less exposed to unlabelled positives). Queries short of negatives are
    topped up with random non-relevant chunks."""
    if sampling not in ("top", "random"):
        raise ValueError(f"negatives.sampling must be top or random, got {sampling!r}")
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks.values():
        by_doc.setdefault(c.doc_id, []).append(c)
    all_ids = sorted(chunks)
    rng = random.Random(seed)
    examples = []
    missing_docs = 0
    for qid in query_ids:
        q = data.queries[qid]
        pos_docs = positives_of(data.qrels, qid)
        if not pos_docs:
            continue  # unanswerable: nothing to pull towards
        ranking = ranked(mined.get(qid, {}))
        pos = positive_chunks(q.text, q.evidence, pos_docs, by_doc, ranking)
        missing_docs += len(pos_docs) - len(pos)
        pool = [c for c in ranking[skip_top : skip_top + depth] if chunks[c].doc_id not in pos_docs]
        for p in pos:
            if sampling == "top":
                negs = pool[:num_negatives]
            else:
                negs = rng.sample(pool, min(num_negatives, len(pool)))
            tries = 0
            while len(negs) < num_negatives and tries < 50 * num_negatives:
                cid = rng.choice(all_ids)
                tries += 1
                if chunks[cid].doc_id not in pos_docs and cid not in negs:
                    negs.append(cid)
            examples.append(
                TrainingExample(
                    qid,
                    q.text,
                    p.chunk_id,
                    p.index_text,
                    tuple(negs),
                    tuple(chunks[c].index_text for c in negs),
                )
            )
    if missing_docs:
        log.warning(
            "%d relevant documents named in qrels/%s.tsv are not in the corpus; skipped",
            missing_docs,
            data.split,
        )
    if not examples:
        raise DataError(f"qrels/{data.split}.tsv gives no (query, relevant chunk) pair to train on")
    return examples


def subset(data: LabelledQueries, query_ids: Sequence[str]) -> LabelledQueries:
    """The same split restricted to ``query_ids`` (for dev evaluation of held-out training
    queries)."""
    from dataclasses import replace

    keep = set(query_ids)
    return replace(
        data,
        queries={q: x for q, x in data.queries.items() if q in keep},
        qrels={q: g for q, g in data.qrels.items() if q in keep},
    )
