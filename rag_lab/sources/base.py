"""Source router protocol: which named knowledge sources (manuals, tickets, standards, ...) a
query is searched in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

DEFAULT_ROUTE = "default"  # the class of a query no rule takes


@dataclass(frozen=True)
class Routing:
    """A query's routing: ``route`` names what decided (a rule's name, ``default``) and
    ``sources`` the sources searched, in the router's order (never empty)."""

    route: str
    sources: tuple[str, ...]


@runtime_checkable
class SourceRouter(Protocol):
    """Contract: ``route(text, metadata, sources)`` picks, for one query (its text as asked and
    its ``queries.jsonl`` metadata), a non-empty subset of ``sources`` (every source of the run,
    in config order) to search; the pipeline searches only those and merges their runs.
    ``names()`` is every source the router may name, checked against the run's sources before
    anything is retrieved; ``routes()`` every route it may give."""

    def route(self, text: str, metadata: Mapping[str, Any], sources: Sequence[str]) -> Routing: ...

    def names(self) -> set[str]: ...

    def routes(self) -> set[str]:
        """Every route name ``route`` may give (rule names, ``default``, ...): what per-route
        merge weights may name (a route of several rules joins theirs with ``+``)."""
        ...
