"""How old a knowledge source is, and when it is too old to trust without a warning: one rule for
source health (``rag-lab serve``, ``rag-lab health``) and for freshness warnings in a context.

A source's date is the first of ``DATE_FIELDS`` its metadata holds as an ISO date: when it was
last updated, else when its current edition became valid, else when it was written (a ticket's
``opened``). A source is *stale* when that date is more than ``max_age_days[source_type]`` days
before ``today`` (``max_age_days["default"]`` for other types; 180 unless configured). A source
without any date is reported as undated, never as fresh.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rag_lab.contract.schema import parse_date
from rag_lab.validate import OptionError, integer

DATE_FIELDS = ("updated", "last_updated", "valid_from", "date", "opened", "created")
DEFAULT_MAX_AGE_DAYS = 180


def source_date(metadata: Mapping[str, Any]) -> dt.date | None:
    """The source's date (see the module docstring), or ``None``."""
    for name in DATE_FIELDS:
        value = metadata.get(name)
        if value not in (None, ""):
            found = parse_date(value)
            if found is not None:
                return found
    return None


@dataclass(frozen=True)
class AgeRule:
    """``max_age_days``: source type → the age in days after which it is stale; the key
    ``default`` covers every other type."""

    max_age_days: Mapping[str, int] = field(
        default_factory=lambda: {"default": DEFAULT_MAX_AGE_DAYS}
    )

    def __post_init__(self) -> None:
        checked = {
            str(k): integer(v, f"max_age_days.{k}", ge=0) for k, v in self.max_age_days.items()
        }
        if not checked:
            raise OptionError("max_age_days", dict(self.max_age_days), "name at least default")
        checked.setdefault("default", DEFAULT_MAX_AGE_DAYS)
        object.__setattr__(self, "max_age_days", checked)

    def limit(self, source_type: Any) -> int:
        return self.max_age_days.get(str(source_type), self.max_age_days["default"])

    def age(self, metadata: Mapping[str, Any], today: dt.date) -> int | None:
        """Days between the source's date and ``today`` (``None``: undated)."""
        date = source_date(metadata)
        return None if date is None else (today - date).days

    def stale(self, metadata: Mapping[str, Any], today: dt.date) -> bool:
        """Older than its type's limit (an undated source is not called stale: it is undated)."""
        age = self.age(metadata, today)
        return age is not None and age > self.limit(metadata.get("source_type"))
