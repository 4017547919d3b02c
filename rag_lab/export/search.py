"""One query against a loaded export, answered with what an agent needs to decide: each chunk
with its text, score and every contract field; per query the flags (sources that disagree, how
far to trust the chunks, which fallback level answered, whether nothing trustworthy was found)
and each stage's time. The HTTP server, the MCP tools and the MLflow model all answer with this.

- ``as_of`` (an ISO date) is the query's ``as_of`` metadata: the stages that read it (metadata
  filter, rule reranker) keep the editions valid that day.
- ``metadata``: the query's other metadata (a device model, earlier turns as ``history``), for
  the stages that declare it.
- ``filters``: ``{field: value or [values]}``: only chunks whose metadata field equals the value
  (or, for a list field such as ``entity_tags``, shares one) are returned; applied to the whole
  ranking before it is cut to ``k``. A filter that matches nothing returns nothing (and says so
  in the flags): it never lets other chunks through.
- ``stale``: a chunk whose source is older than the age rule allows (``rag_lab.contract.age``).
- ``principal``: who asks (``{user, groups}`` or a user name; ``rag_lab.access``), the query's
  ``principal`` metadata: with a ``permissions`` policy in the export, the pipeline returns only
  what it may read (no principal: anonymous). ``readable_chunk`` is ``get_chunk``'s check.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rag_lab.access import PRINCIPAL_FIELD
from rag_lab.contract.age import AgeRule, source_date
from rag_lab.errors import ConfigError
from rag_lab.pipeline.fallback import FallbackPipeline
from rag_lab.pipeline.pipeline import Pipeline
from rag_lab.pipeline.sources import SourcesPipeline
from rag_lab.protocols import ChunkAssessing, implements
from rag_lab.ranking import ranked
from rag_lab.types import Chunk

QUERY_ID = "q"  # the id of the one query of a request inside the pipeline


@dataclass(frozen=True)
class Hit:
    """One returned chunk: its place, text, ``source`` file and ``page`` (``None`` where the
    parser knows none) and every metadata field (the contract's fields: ``version``,
    ``valid_from``, ``valid_to``, ``section_type``, ``source_type``, ``entity_tags``...);
    ``assessments`` what the stages said of it (``credibility``); ``stale`` whether its source is
    older than the age rule allows, ``age_days`` its age (``None``: undated)."""

    rank: int
    chunk_id: str
    doc_id: str
    score: float
    text: str
    title: str
    section: str
    source: str | None
    page: int | None
    metadata: dict[str, Any]
    assessments: dict[str, float] = field(default_factory=dict)
    stale: bool = False
    age_days: int | None = None


@dataclass(frozen=True)
class Flags:
    """What an agent must know about the query as a whole.

    ``conflicts``: pairs of returned chunks from different documents that state different values
    for the same thing (``{chunks, docs, versions, entity, statements, values}``);
    ``fallback_level`` / ``fallback_name``: the chain's level that answered (``main`` = the
    pipeline itself; ``None`` without a chain); ``no_trustworthy_result``: nothing was returned,
    the chain refused, every chunk fell below the credibility threshold, or the filters matched
    nothing; ``stale_sources``: documents among the chunks whose source is stale;
    ``filtered_out``: chunks the request's filters removed from the ranking; ``route`` /
    ``sources``: over several routed sources (``sources=rules``), what decided the query's route
    (a rule's name, ``default``, ``llm``) and the sources searched (``None`` / ``[]`` without)."""

    conflicts: list[dict[str, Any]] = field(default_factory=list)
    fallback_level: int | None = None
    fallback_name: str | None = None
    no_trustworthy_result: bool = False
    stale_sources: list[str] = field(default_factory=list)
    filtered_out: int = 0
    route: str | None = None
    sources: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SearchResult:
    query: str
    k: int
    hits: list[Hit]
    flags: Flags
    timings_ms: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        """The reply as plain JSON-able data (built field by field: ``asdict`` deep-copies every
        metadata value, a third of a request's time)."""
        f = self.flags
        return {
            "query": self.query,
            "k": self.k,
            "hits": [
                {
                    "rank": h.rank,
                    "chunk_id": h.chunk_id,
                    "doc_id": h.doc_id,
                    "score": h.score,
                    "text": h.text,
                    "title": h.title,
                    "section": h.section,
                    "source": h.source,
                    "page": h.page,
                    "metadata": h.metadata,
                    "assessments": h.assessments,
                    "stale": h.stale,
                    "age_days": h.age_days,
                }
                for h in self.hits
            ],
            "flags": {
                "conflicts": f.conflicts,
                "fallback_level": f.fallback_level,
                "fallback_name": f.fallback_name,
                "no_trustworthy_result": f.no_trustworthy_result,
                "stale_sources": f.stale_sources,
                "filtered_out": f.filtered_out,
                "route": f.route,
                "sources": f.sources,
            },
            "timings_ms": self.timings_ms,
        }


def _matches(chunk: Chunk, filters: Mapping[str, Any]) -> bool:
    for name, wanted in filters.items():
        values = {str(v) for v in (wanted if isinstance(wanted, (list, tuple)) else [wanted])}
        have = chunk.metadata.get(name)
        held = {str(v) for v in have} if isinstance(have, (list, tuple)) else {str(have)}
        if have is None or not values & held:
            return False
    return True


def check_request(query: Any, k: Any, k_max: int, filters: Any) -> None:
    """A request's arguments, refused in one line (library callers get the server's rules)."""
    if not isinstance(query, str) or not query.strip():
        raise ConfigError("query must be a non-empty string")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= k_max:
        raise ConfigError(f"k must be an integer in 1..{k_max}, got {k!r}")
    if filters is not None and not isinstance(filters, Mapping):
        raise ConfigError("filters must be a mapping of metadata field to value(s)")


def search(
    pipe: Pipeline,
    query: str,
    k: int = 10,
    *,
    as_of: str | dt.date | None = None,
    filters: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    age_rule: AgeRule | None = None,
    today: dt.date | None = None,
    principal: Any = None,
) -> SearchResult:
    """``query`` through ``pipe`` at its depth (``evaluation.retrieve_k``, at least ``k``), the
    ranking filtered by ``filters`` and cut to ``k``; see the module docstring."""
    meta = dict(metadata or {})
    if principal is not None:
        meta[PRINCIPAL_FIELD] = principal
    if as_of is not None:
        meta["as_of"] = as_of.isoformat() if isinstance(as_of, dt.date) else str(as_of)
    depth = max(int(k), pipe.retrieve_k)
    result = pipe.run({QUERY_ID: query}, depth, 0, {QUERY_ID: meta})
    chunks = pipe.all_chunks
    order = ranked(result.final.get(QUERY_ID, {}))
    kept = [c for c in order if _matches(chunks[c], filters)] if filters else order
    top = [chunks[c] for c in kept[:k]]
    assessors = [s for s in pipe.postprocessors.values() if implements(s, ChunkAssessing)]
    rule, day = age_rule or AgeRule(), today or dt.date.today()
    hits = []
    for rank, chunk in enumerate(top, 1):
        assessments: dict[str, float] = {}
        for stage in assessors:
            assessments.update(stage.assess(chunk, top))
        age = rule.age(chunk.metadata, day)
        hits.append(
            Hit(
                rank,
                chunk.chunk_id,
                chunk.doc_id,
                float(result.final[QUERY_ID][chunk.chunk_id]),
                chunk.text,
                chunk.title,
                chunk.section,
                chunk.metadata.get("source"),
                chunk.metadata.get("page"),
                _plain(chunk.metadata),
                assessments,
                rule.stale(chunk.metadata, day),
                age,
            )
        )
    returned = {h.chunk_id for h in hits}
    conflicts = [
        pair
        for pair in (result.annotations.get(QUERY_ID, {}).get("conflict") or [])
        if set(pair.get("chunks", [])) <= returned
    ]
    level = result.fallback_level.get(QUERY_ID) if result.fallback_level else None
    routing = result.routes.get(QUERY_ID)
    names = pipe.chain.names() if isinstance(pipe, FallbackPipeline) and pipe.chain else []
    refused = level is not None and level == len(names) - 1
    trust = min((float(s.threshold) for s in assessors), default=-math.inf)
    below = (
        bool(hits)
        and bool(assessors)
        and all(h.assessments.get("credibility", math.inf) < trust for h in hits)
    )
    flags = Flags(
        conflicts=conflicts,
        fallback_level=level,
        fallback_name=names[level] if level is not None and level < len(names) else None,
        no_trustworthy_result=not hits or refused or below,
        stale_sources=sorted({h.doc_id for h in hits if h.stale}),
        filtered_out=len(order) - len(kept),
        route=routing.route if routing is not None else None,
        sources=list(routing.sources) if routing is not None else [],
    )
    timings = {name: round(1000 * s, 3) for name, s in result.seconds.items()}
    return SearchResult(query, int(k), hits, flags, timings)


def _plain(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata as JSON-able values (lists for tuples, strings for dates)."""
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, (dt.date, dt.datetime)):
            value = value.isoformat()
        out[str(key)] = value
    return out


def readable_chunk(pipe: Pipeline, chunk_id: str, principal: Any = None) -> Chunk | None:
    """Chunk ``chunk_id`` if ``principal`` may read it (any chunk without a ``permissions``
    policy); ``None`` when it does not exist or may not be read (the two are not told apart)."""
    chunk = pipe.all_chunks.get(chunk_id)
    if chunk is None or (pipe.access is not None and not pipe.access.readable(chunk, principal)):
        return None
    return chunk


def chunk_record(chunk: Chunk) -> dict[str, Any]:
    """One chunk by id (``get_chunk``): its text, place and metadata."""
    return {
        "chunk_id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "text": chunk.text,
        "title": chunk.title,
        "section": chunk.section,
        "metadata": _plain(chunk.metadata),
    }


def hit_columns(hits: Sequence[Hit]) -> list[dict[str, Any]]:
    """Hits as flat rows (the MLflow model's table): the metadata fields as their own columns."""
    return [
        {
            **{k: v for k, v in asdict(h).items() if k not in ("metadata", "assessments")},
            **h.metadata,
            **h.assessments,
        }
        for h in hits
    ]


def sources(pipe: Pipeline) -> list[dict[str, Any]]:
    """Every document ``pipe`` can return, once: ``doc_id``, ``source``, ``source_type``,
    ``last_updated`` (``rag_lab.contract.age.source_date``) and the fallback ``level`` whose corpus
    holds it (``main``: the main corpus); over several routed sources, ``knowledge_source``: the
    source holding it. What an export records in ``sources.json``."""
    corpora: list[tuple[str, str | None, Mapping[str, Chunk]]] = []
    if isinstance(pipe, SourcesPipeline):
        corpora += [("main", s.name, s.pipeline.chunks) for s in pipe.sources]
    else:
        corpora.append(("main", None, pipe.chunks))
    if isinstance(pipe, FallbackPipeline):
        corpora += [
            (lv.name, None, lv.pipeline.chunks) for lv in pipe.levels if lv.corpus is not None
        ]
    out: dict[str, dict[str, Any]] = {}
    for level, owner, chunks in corpora:
        for chunk in chunks.values():
            if chunk.doc_id in out:
                continue
            date = source_date(chunk.metadata)
            out[chunk.doc_id] = {
                "doc_id": chunk.doc_id,
                "source": chunk.metadata.get("source"),
                "source_type": chunk.metadata.get("source_type"),
                "last_updated": None if date is None else date.isoformat(),
                "level": level,
            }
            if owner is not None:
                out[chunk.doc_id]["knowledge_source"] = owner
    return sorted(out.values(), key=lambda s: s["doc_id"])
