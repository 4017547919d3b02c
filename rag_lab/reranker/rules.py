"""A rule reranker over the metadata contract's fields: validity, section type, source type and
the fault code a query names.

Each chunk's score is first put on one scale (min-max over the query's run, into ``[0.1, 1]``
so a factor always moves it, whatever the retriever's score range), then multiplied by every rule
that applies; the entity rule may drop the chunk instead. Rules read chunk metadata the parsers
and the metadata contract write (``valid_from``/``valid_to``, ``section_type``, ``source_type``,
``entity_tags``); a chunk without a field is left alone by that field's rule.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from rag_lab.errors import ConfigError
from rag_lab.postprocess._as_of import FIELD, QueryDates
from rag_lab.postprocess.freshness import FreshnessFilter
from rag_lab.ranking import minmax
from rag_lab.types import Chunk, Run
from rag_lab.validate import OptionError, choice, number

ENTITY_MODES = ("drop", "demote", "off")
_FLOOR = 0.1  # the lowest normalised score: a factor on the last chunk still changes its place


class RuleReranker:
    """Args:
    as_of: ISO date; a chunk whose document is not valid on it (``valid_from``/``valid_to``)
        gets ``expired_factor``. ``null`` turns the validity rule off (for queries without a
        date of their own).
    query_as_of: a query's own ``as_of`` metadata is its date, over ``as_of``
        (``rag_lab.protocols.QueryMetadataAware``: the pipeline passes it in before each run).
    expired_factor: multiplier of a chunk outside its validity window (``0 <= f``).
    section_type_weights: ``section_type`` → multiplier (``troubleshooting: 1.3``).
    source_type_weights: ``source_type`` → multiplier (``ticket: 0.8``).
    entity_rule: a chunk that names fault codes, none of them one the query names (the query asks
        about SV0432, the chunk is about SV0422), is dropped (``drop``), multiplied by
        ``entity_factor`` (``demote``), or left alone (``off``). Chunks naming no code, and
        queries naming none, are never touched.
    entity_pattern: what a fault code looks like (matched in the query and in the chunk's
        ``entity_tags``, else its text).
    entity_factor: the ``demote`` multiplier.
    """

    query_metadata_fields = (FIELD,)

    def __init__(
        self,
        as_of: str | None = None,
        expired_factor: float = 0.5,
        section_type_weights: Mapping[str, float] | None = None,
        source_type_weights: Mapping[str, float] | None = None,
        entity_rule: str = "drop",
        entity_pattern: str = r"\b(?:[A-Z]{1,2}\d{3,4}|AL\.\d{3})\b",
        entity_factor: float = 0.3,
        query_as_of: bool = True,
    ) -> None:
        # the validity window is the freshness filter's (one definition of "valid on")
        self.dates = QueryDates(as_of, query_as_of)
        self.expired_factor = number(expired_factor, "expired_factor", ge=0)
        self.section_type_weights = {
            str(k): number(v, f"section_type_weights.{k}", ge=0)
            for k, v in (section_type_weights or {}).items()
        }
        self.source_type_weights = {
            str(k): number(v, f"source_type_weights.{k}", ge=0)
            for k, v in (source_type_weights or {}).items()
        }
        self.entity_rule = choice(entity_rule, "entity_rule", ENTITY_MODES)
        try:
            self.entity_pattern = re.compile(entity_pattern)
        except re.error as exc:
            raise OptionError("entity_pattern", entity_pattern, f"not a regex ({exc})") from None
        self.entity_factor = number(entity_factor, "entity_factor", ge=0)
        self.stats: dict[str, float] = {}

    def set_query_metadata(self, metadata: Mapping[str, Mapping[str, Any]]) -> None:
        self.dates.set(metadata)

    def _codes(self, chunk: Chunk) -> set[str]:
        tags = chunk.metadata.get("entity_tags")
        if isinstance(tags, (list, tuple)):
            return {str(t) for t in tags if self.entity_pattern.fullmatch(str(t))}
        return set(self.entity_pattern.findall(chunk.text))

    def _factor(self, chunk: Chunk, validity: FreshnessFilter | None) -> float:
        f = 1.0
        if validity is not None:
            try:
                valid = validity.valid(chunk)
            except ConfigError:
                valid = True  # an unparseable date is the contract's problem, not a demotion
            if not valid:
                f *= self.expired_factor
        f *= self.section_type_weights.get(str(chunk.metadata.get("section_type")), 1.0)
        f *= self.source_type_weights.get(str(chunk.metadata.get("source_type")), 1.0)
        return f

    def process(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run:
        t0 = time.perf_counter()
        out: Run = {}
        dropped = demoted = changed = 0
        for qid, scores in run.items():
            ids = sorted(scores)
            if not ids:
                out[qid] = {}
                continue
            base = _FLOOR + (1 - _FLOOR) * minmax([scores[c] for c in ids])
            wanted = set(self.entity_pattern.findall(queries.get(qid, "")))
            validity = self.dates.validity(qid)
            new: dict[str, float] = {}
            for cid, s in zip(ids, np.asarray(base, dtype=float)):
                chunk = chunks[cid]
                f = self._factor(chunk, validity)
                if wanted and self.entity_rule != "off":
                    codes = self._codes(chunk)
                    if codes and not (codes & wanted):
                        if self.entity_rule == "drop":
                            dropped += 1
                            continue
                        f *= self.entity_factor
                        demoted += 1
                changed += f != 1.0
                new[cid] = float(s) * f
            out[qid] = new
        n = max(len(run), 1)
        self.stats = {
            "entity_dropped_per_query": dropped / n,
            "entity_demoted_per_query": demoted / n,
            "reweighted_per_query": changed / n,
            "dated_queries": float(sum(self.dates.validity(q) is not None for q in run)),
            "ms_per_query": 1000 * (time.perf_counter() - t0) / n,
        }
        return out
