"""The date each query's answers must be valid on: the query's own ``as_of`` metadata when it has
one (and the stage reads it), else the stage's configured ``as_of``, else none.

The validity window itself is the freshness filter's (``FreshnessFilter.valid``: one definition
of "valid on").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_lab.errors import ConfigError, DataError
from rag_lab.postprocess.freshness import FreshnessFilter
from rag_lab.validate import OptionError, boolean

FIELD = "as_of"


class QueryDates:
    """``as_of``: the configured date (ISO) or ``None``; ``from_query``: a query's ``as_of``
    metadata wins over it. ``set(metadata)`` takes the pipeline's per-query fields
    (``QueryMetadataAware``); ``validity(qid)`` is the freshness filter for that query's date."""

    def __init__(self, as_of: str | None, from_query: bool) -> None:
        self.default = self._filter(as_of, None) if as_of else None
        self.from_query = boolean(from_query, "query_as_of")
        self._by_query: dict[str, FreshnessFilter] = {}
        self._by_date: dict[str, FreshnessFilter] = {}

    @staticmethod
    def _filter(value: Any, qid: str | None) -> FreshnessFilter:
        try:
            return FreshnessFilter(str(value))
        except ConfigError:
            if qid is None:
                raise OptionError(FIELD, value, "must be an ISO date (YYYY-MM-DD)") from None
            raise DataError(
                f"query {qid}: metadata {FIELD}={value!r} is not an ISO date (YYYY-MM-DD)"
            ) from None

    def set(self, metadata: Mapping[str, Mapping[str, Any]]) -> None:
        self._by_query = {}
        if not self.from_query:
            return
        for qid, meta in metadata.items():
            value = meta.get(FIELD)
            if value is None or value == "":
                continue
            key = str(value)
            if key not in self._by_date:
                self._by_date[key] = self._filter(value, qid)
            self._by_query[qid] = self._by_date[key]

    def validity(self, qid: str) -> FreshnessFilter | None:
        return self._by_query.get(qid, self.default)

    @property
    def n_dated(self) -> int:
        """Queries of the last ``set`` that carry their own date."""
        return len(self._by_query)
