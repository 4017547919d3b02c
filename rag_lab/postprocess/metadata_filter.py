"""Metadata filters: keep the chunks whose metadata matches, the ones valid on the query's date,
and only the latest version of each document family.

Fields come from the metadata contract (every chunk carries them, ``null`` when unknown). A
filter that matches none of a query's chunks does what ``on_empty`` says: ``keep`` (the default:
the query keeps its run, an empty context being a refusal that is the fallback chain's decision),
``empty`` (the query gets nothing) or ``fail`` (the run stops naming the query). Either way the
query is counted (``emptied_queries``) and flagged in its ``filter_empty`` column. A criterion on a
permission field (``readers``) never fails open: ``keep`` keeps only the chunks that pass it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.access import READERS_FIELD
from rag_lab.errors import ConfigError, DataError
from rag_lab.postprocess._as_of import FIELD, QueryDates
from rag_lab.postprocess.freshness import FreshnessFilter
from rag_lab.ranking import ranked
from rag_lab.types import Chunk, Run
from rag_lab.validate import OptionError, boolean, choice

ON_EMPTY = ("keep", "empty", "fail")
# fields whose criteria never fail open (on_empty=keep still applies them)
PERMISSION_FIELDS = frozenset({READERS_FIELD})


def _version_key(value: Any) -> tuple[int, ...]:
    """``"2.10"`` > ``"2.9"`` > ``"2"``: the numbers in a version string, compared in order."""
    return tuple(int(n) for n in re.findall(r"\d+", str(value or "")))


class MetadataFilter:
    """Args:
    equals: field → value a chunk must have (``{source_type: manual}``).
    any_of: field → allowed values (``{section_type: [troubleshooting, specification]}``); a
        list-valued field (``entity_tags``) matches when it shares one value.
    latest_version: keep, of each document family, only the documents with the highest
        ``version`` in the corpus (``2.1`` over ``1.0``).
    family_pattern: how a document id names its family: the id with the first match of this
        regular expression removed (``hx200-manual-v2`` → ``hx200-manual``); documents whose ids
        do not match are a family of their own.
    as_of: ISO date: keep only chunks whose document is valid on it (``valid_from`` ≤ t ≤
        ``valid_to``, either end open when absent; a date that does not parse counts as valid).
        ``null``: no date, unless the query has one.
    query_as_of: a query's own ``as_of`` metadata is its date, over ``as_of``
        (``rag_lab.protocols.QueryMetadataAware``: the pipeline passes it in before each run).
    on_empty: a query whose chunks the filter would all remove: ``keep`` its run (minus the chunks
        a permission criterion removes), return it ``empty``, or ``fail`` (``DataError`` naming
        the query). Counted as ``emptied_queries``; flagged per query as ``filter_empty``.
    """

    query_metadata_fields = (FIELD,)
    annotation_names = ("filter_empty",)

    def __init__(
        self,
        equals: Mapping[str, Any] | None = None,
        any_of: Mapping[str, Sequence[Any]] | None = None,
        latest_version: bool = False,
        family_pattern: str = r"(?:[-_ ]v?\d+(?:\.\d+)*)+$",
        as_of: str | None = None,
        query_as_of: bool = True,
        on_empty: str = "keep",
    ) -> None:
        self.equals = dict(equals or {})
        self.any_of: dict[str, set[str]] = {}
        for field, values in (any_of or {}).items():
            if isinstance(values, str) or not isinstance(values, (list, tuple, set)):
                raise OptionError(f"any_of.{field}", values, "must be a list of values")
            self.any_of[str(field)] = {str(v) for v in values}
        self.latest_version = boolean(latest_version, "latest_version")
        try:
            self.family_pattern = re.compile(family_pattern)
        except re.error as exc:
            raise OptionError("family_pattern", family_pattern, f"not a regex ({exc})") from None
        self.dates = QueryDates(as_of, query_as_of)
        self.on_empty = choice(on_empty, "on_empty", ON_EMPTY)
        self.stats: dict[str, float] = {}
        self.annotations: dict[str, dict[str, Any]] = {}
        self._latest: tuple[int, set[str]] | None = None

    def set_query_metadata(self, metadata: Mapping[str, Mapping[str, Any]]) -> None:
        self.dates.set(metadata)

    def family(self, doc_id: str) -> str:
        return self.family_pattern.sub("", doc_id, count=1) or doc_id

    def _latest_docs(self, chunks: Mapping[str, Chunk]) -> set[str]:
        """The documents that are the newest of their family, over the whole corpus (once)."""
        if self._latest is not None and self._latest[0] == len(chunks):
            return self._latest[1]
        versions: dict[str, tuple[int, ...]] = {}
        for c in chunks.values():
            versions.setdefault(c.doc_id, _version_key(c.metadata.get("version")))
        best: dict[str, tuple[int, ...]] = {}
        for doc, v in versions.items():
            fam = self.family(doc)
            best[fam] = max(best.get(fam, ()), v)
        keep = {doc for doc, v in versions.items() if v == best[self.family(doc)]}
        self._latest = (len(chunks), keep)
        return keep

    def keeps(
        self, chunk: Chunk, latest: set[str] | None, only: frozenset[str] | None = None
    ) -> bool:
        """Whether ``chunk`` passes every criterion (``only``: just those on these fields)."""
        meta = chunk.metadata
        for field, value in self.equals.items():
            if (only is None or field in only) and str(meta.get(field)) != str(value):
                return False
        for field, allowed in self.any_of.items():
            if only is not None and field not in only:
                continue
            have = meta.get(field)
            values = have if isinstance(have, (list, tuple)) else [have]
            if not {str(v) for v in values} & allowed:
                return False
        return only is not None or latest is None or chunk.doc_id in latest

    def process(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run:
        t0 = time.perf_counter()
        latest = self._latest_docs(chunks) if self.latest_version else None
        out: Run = {}
        removed = emptied = dated = 0
        self.annotations = {}
        guarded = PERMISSION_FIELDS & {*self.equals, *self.any_of}
        for qid, scores in run.items():
            validity = self.dates.validity(qid)
            dated += validity is not None
            kept = {
                c: s
                for c, s in scores.items()
                if self.keeps(chunks[c], latest) and _valid(validity, chunks[c])
            }
            if scores and not kept:
                emptied += 1
                self.annotations[qid] = {"filter_empty": self.on_empty}
                if self.on_empty == "fail":
                    raise DataError(
                        f"postprocess.metadata_filter: query {qid}: the filter removes all "
                        f"{len(scores)} of its chunks (on_empty=fail; keep or empty go on)"
                    )
                if self.on_empty == "keep":
                    only = frozenset(guarded)
                    kept = {
                        c: s
                        for c, s in scores.items()
                        if not guarded or self.keeps(chunks[c], None, only)
                    }
            removed += len(scores) - len(kept)
            out[qid] = {c: kept[c] for c in ranked(kept)}
        n = max(len(run), 1)
        self.stats = {
            "removed_per_query": removed / n,
            "emptied_queries": float(emptied),
            "dated_queries": float(dated),
            "ms_per_query": 1000 * (time.perf_counter() - t0) / n,
        }
        return out


def _valid(validity: FreshnessFilter | None, chunk: Chunk) -> bool:
    if validity is None:
        return True
    try:
        return validity.valid(chunk)
    except ConfigError:  # an unparseable date is the contract's problem, not a removal
        return True
