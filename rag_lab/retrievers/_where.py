"""The metadata filter a vector store applies inside its search (``rag_lab.retrievers._store``):
contract fields equal to a value or in a set, and the validity window on a date (the query's own
``as_of`` metadata, or a configured date). One definition, in plain Python (``matches``: the
"after" order and the reference) and as the payload each stored chunk carries, which every store
translates into its own filter language."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rag_lab.access import readers_of
from rag_lab.validate import OptionError

# fields every stored chunk carries, whatever the filter: a filter set later (another query's
# metadata, a served request) needs no rebuild
STORED_FIELDS = ("version", "section_type", "source_type", "doc_id")
FROM, TO = "valid_from_day", "valid_to_day"  # ISO dates as day ordinals (null when open)
READERS = "readers"  # canonical reader tokens (``rag_lab.access``)


def day(value: Any) -> int | None:
    """An ISO date (``2024-07-01``, a datetime) as its ordinal; ``None`` when absent or not a
    date (an unparseable date does not filter, as in ``postprocess.metadata_filter``)."""
    if value is None or value == "":
        return None
    try:
        return dt.date.fromisoformat(str(value)[:10]).toordinal()
    except ValueError:
        return None


def _text(value: Any) -> list[str]:
    values = value if isinstance(value, (list, tuple)) else [value]
    return [str(v) for v in values if v is not None]


@dataclass(frozen=True)
class Condition:
    """One query's filter: ``equals`` field → value, ``any_of`` field → values (a list field
    matches on a shared value), ``on`` a day ordinal the chunk must be valid on."""

    equals: tuple[tuple[str, str], ...] = ()
    any_of: tuple[tuple[str, tuple[str, ...]], ...] = ()
    on: int | None = None

    @property
    def empty(self) -> bool:
        return not (self.equals or self.any_of or self.on is not None)

    def matches(self, payload: Mapping[str, Any]) -> bool:
        for field, value in self.equals:
            if value not in payload.get(field, []):
                return False
        for field, values in self.any_of:
            if not set(values) & set(payload.get(field, [])):
                return False
        if self.on is not None:
            start, end = payload.get(FROM), payload.get(TO)
            if (start is not None and start > self.on) or (end is not None and end < self.on):
                return False
        return True


class Where:
    """Args (a store retriever's): ``equals``, ``any_of`` (contract field filters), ``as_of``
    (ISO date) and ``query_as_of`` (a query's own ``as_of`` metadata wins; off by default)."""

    def __init__(
        self,
        equals: Mapping[str, Any] | None = None,
        any_of: Mapping[str, Sequence[Any]] | None = None,
        as_of: str | None = None,
        query_as_of: bool = False,
    ) -> None:
        self.equals = tuple(sorted((str(f), str(v)) for f, v in (equals or {}).items()))
        pairs = []
        for field, values in (any_of or {}).items():
            if isinstance(values, str) or not isinstance(values, (list, tuple)):
                raise OptionError(f"any_of.{field}", values, "must be a list of values")
            pairs.append((str(field), tuple(sorted(str(v) for v in values))))
        self.any_of = tuple(sorted(pairs))
        self.as_of = day(as_of)
        if as_of is not None and self.as_of is None:
            raise OptionError("as_of", as_of, "must be an ISO date (YYYY-MM-DD)")
        self.query_as_of = bool(query_as_of)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys(
                [*STORED_FIELDS, *(f for f, _ in self.equals), *(f for f, _ in self.any_of)]
            )
        )

    def payload(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """What a stored chunk carries for filtering: each field as a list of strings, the
        validity window as day ordinals, the readers in canonical form."""
        out: dict[str, Any] = {f: _text(metadata.get(f)) for f in self.fields}
        out[FROM], out[TO] = day(metadata.get("valid_from")), day(metadata.get("valid_to"))
        readers = readers_of(metadata)
        out[READERS] = sorted(readers) if readers is not None else None
        return out

    def condition(self, metadata: Mapping[str, Any] | None) -> Condition:
        """The filter for a query with ``metadata`` (its ``as_of`` when ``query_as_of``)."""
        on = self.as_of
        if self.query_as_of and metadata and metadata.get("as_of") not in (None, ""):
            on = day(metadata["as_of"])
        return Condition(self.equals, self.any_of, on)
