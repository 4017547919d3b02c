"""The rule router: ordered rules on the query text (a regex) and its metadata pick the sources;
a query no rule takes goes to the default sources."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rag_lab.sources.base import DEFAULT_ROUTE, Routing
from rag_lab.validate import OptionError, boolean, choice

_KEYS = ("pattern", "metadata", "sources")


@dataclass(frozen=True)
class Rule:
    """One rule: all its conditions must hold (``pattern`` searched in the text; each
    ``metadata`` field equal to the value, or one of the values of a list); no condition takes
    every query that reaches it."""

    name: str
    pattern: re.Pattern[str] | None
    metadata: Mapping[str, tuple[Any, ...]]
    sources: tuple[str, ...]

    def matches(self, text: str, metadata: Mapping[str, Any]) -> bool:
        if self.pattern is not None and self.pattern.search(text) is None:
            return False
        return all(metadata.get(k) in values for k, values in self.metadata.items())


class RuleRouter:
    """Args:
    rules: rule name → ``{pattern, metadata, sources}``, tried in order. ``pattern``: a regex
        searched in the query text as asked (before query transforms); ``metadata``: ``{field:
        value | [values]}`` the query's ``queries.jsonl`` metadata must hold (e.g. a UI's
        ``source_type`` choice); ``sources``: the source names the rule searches (non-empty).
    default: the sources of a query no rule takes; ``null`` = every source of the run.
    combine: ``first`` (the first rule that takes the query decides) or ``union`` (every rule
        that takes it adds its sources; the route is their names joined by ``+``).
    ignore_case: patterns match regardless of case.
    """

    def __init__(
        self,
        rules: Mapping[str, Mapping[str, Any]] | None = None,
        default: Sequence[str] | None = None,
        combine: str = "first",
        ignore_case: bool = True,
    ) -> None:
        self.combine = choice(combine, "combine", ("first", "union"))
        flags = re.IGNORECASE if boolean(ignore_case, "ignore_case") else 0
        if rules is not None and not isinstance(rules, Mapping):
            raise OptionError("rules", rules, "must map rule names to {pattern, metadata, sources}")
        self.rules = [self._rule(str(n), r, flags) for n, r in (rules or {}).items()]
        self.default = None if default is None else _names(default, "default")

    @staticmethod
    def _rule(name: str, spec: Any, flags: int) -> Rule:
        where = f"rules.{name}"
        if not isinstance(spec, Mapping):
            raise OptionError(where, spec, "must be a mapping {pattern, metadata, sources}")
        unknown = sorted(set(spec) - set(_KEYS))
        if unknown:
            raise OptionError(
                f"{where}.{unknown[0]}", spec[unknown[0]], f"unknown key (keys: {', '.join(_KEYS)})"
            )
        pattern = None
        if spec.get("pattern") is not None:
            try:
                pattern = re.compile(str(spec["pattern"]), flags)
            except re.error as exc:
                raise OptionError(
                    f"{where}.pattern", spec["pattern"], f"not a regex ({exc})"
                ) from None
        meta = spec.get("metadata") or {}
        if not isinstance(meta, Mapping):
            raise OptionError(f"{where}.metadata", meta, "must map fields to a value or a list")
        values = {
            str(k): tuple(v) if isinstance(v, (list, tuple)) else (v,) for k, v in meta.items()
        }
        return Rule(name, pattern, values, _names(spec.get("sources"), f"{where}.sources"))

    def names(self) -> set[str]:
        return {s for r in self.rules for s in r.sources} | set(self.default or ())

    def routes(self) -> set[str]:
        return {r.name for r in self.rules} | {DEFAULT_ROUTE}

    def route(self, text: str, metadata: Mapping[str, Any], sources: Sequence[str]) -> Routing:
        taken = [r for r in self.rules if r.matches(text, metadata)]
        if self.combine == "first":
            taken = taken[:1]
        if taken:
            wanted = {s for r in taken for s in r.sources}
            routing = Routing("+".join(r.name for r in taken), _ordered(wanted, sources))
        else:
            wanted = set(sources if self.default is None else self.default)
            routing = Routing(DEFAULT_ROUTE, _ordered(wanted, sources))
        return routing


def _names(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise OptionError(where, value, "must be a non-empty list of source names")
    return tuple(str(v) for v in value)


def _ordered(wanted: set[str], sources: Sequence[str]) -> tuple[str, ...]:
    """``wanted`` in the run's source order (a name the run lacks was refused at build time)."""
    return tuple(s for s in sources if s in wanted)
