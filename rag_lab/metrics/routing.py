"""How well a source router routed, and how well each source answers its own queries: a pure
function over what the run holds (each query's routed sources, each source's own run, the labels).

A query's *expected sources* are its ``queries.jsonl`` metadata ``sources`` (a list) when it has
one, else the sources that hold a document judged relevant to it (qrels score > 0). Queries with no
expected source (unanswerable ones) are left out of every rate.

- ``routing/accuracy``: the share of queries routed to exactly their expected sources;
- ``routing/recall``: the mean share of a query's expected sources it was routed to (1.0: nothing
  it needs was left unsearched); ``routing/precision``: the mean share of the searched sources that
  were expected (1.0: nothing searched in vain);
- ``routing/sources_per_query``: the mean number of sources searched (every query);
- ``sources/<s>/hit_rate_at_<k>``: over the queries that expect ``s``, the share whose top ``k``
  documents of ``s``'s own run (whatever the router chose) hold a relevant document;
  ``sources/<s>/n_expected``: how many queries expect it; ``sources/<s>/routed_share``: the share
  of all queries searched in it;
- ``by_category/<c>/routing/accuracy`` and ``.../recall``: per query category.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rag_lab.metrics.relevance import to_document_run
from rag_lab.ranking import ranked
from rag_lab.types import Qrels, Query, Run

SOURCES_FIELD = "sources"  # a query's expected sources, given by hand in its metadata


def expected_sources(
    queries: Mapping[str, Query], qrels: Qrels, doc_source: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    """Each query's expected sources (sorted): its metadata ``sources``, else the sources of its
    relevant documents (``doc_source``: document id → source name)."""
    out: dict[str, tuple[str, ...]] = {}
    for qid in {*queries, *qrels}:
        q = queries.get(qid)
        given = q.metadata.get(SOURCES_FIELD) if q is not None else None
        if isinstance(given, (list, tuple)) and given:
            out[qid] = tuple(sorted(str(s) for s in given))
            continue
        labels = qrels.get(qid, {})
        found = {doc_source[d] for d, g in labels.items() if g > 0 and d in doc_source}
        out[qid] = tuple(sorted(found))
    return out


def routing_metrics(
    routed: Mapping[str, Sequence[str]],
    source_runs: Mapping[str, Run],
    chunk_doc: Mapping[str, str],
    expected: Mapping[str, Sequence[str]],
    qrels: Qrels,
    queries: Mapping[str, Query],
    k: int = 5,
) -> dict[str, float]:
    """The routing and per-source metrics of the module docstring. ``routed``: each query's
    searched sources; ``source_runs``: each source's final run over every query (chunk ids);
    ``chunk_doc``: chunk id → document id over every source."""
    out: dict[str, float] = {}
    judged = [q for q in routed if expected.get(q)]
    cats: dict[str, list[str]] = {}
    for qid in judged:
        cat = queries[qid].category if qid in queries else None
        if cat:
            cats.setdefault(cat, []).append(qid)

    def exact(q: str) -> float:
        return float(set(routed[q]) == set(expected[q]))

    def recall(q: str) -> float:
        return len(set(routed[q]) & set(expected[q])) / len(set(expected[q]))

    def precision(q: str) -> float:
        return len(set(routed[q]) & set(expected[q])) / max(len(set(routed[q])), 1)

    for prefix, qids in [("", judged), *((f"by_category/{c}/", qs) for c, qs in cats.items())]:
        if not qids:
            continue
        out[f"{prefix}routing/accuracy"] = sum(map(exact, qids)) / len(qids)
        out[f"{prefix}routing/recall"] = sum(map(recall, qids)) / len(qids)
        if not prefix:
            out["routing/precision"] = sum(map(precision, qids)) / len(qids)
    if routed:
        out["routing/sources_per_query"] = sum(len(s) for s in routed.values()) / len(routed)
    for name, run in source_runs.items():
        docs = to_document_run(run, chunk_doc)
        wanting = [q for q in judged if name in expected[q]]
        out[f"sources/{name}/n_expected"] = float(len(wanting))
        if routed:
            out[f"sources/{name}/routed_share"] = sum(name in s for s in routed.values()) / len(
                routed
            )
        if wanting:
            hits = 0
            for qid in wanting:
                relevant = {d for d, g in qrels.get(qid, {}).items() if g > 0}
                hits += bool(relevant & set(ranked(docs.get(qid, {}))[:k]))
            out[f"sources/{name}/hit_rate_at_{k}"] = hits / len(wanting)
    return out
