"""Freshness warnings in the context: a chunk whose source is older than its type's age limit
reaches the generator with a warning in its block header ("published 412 days ago"), so an
answer from a three-year-old ticket can say so.

The age rule is the one source health uses (``rag_lab.contract.age.AgeRule``: the source's date
is the first of ``updated``, ``last_updated``, ``valid_from``, ``date``, ``opened``, ``created``;
stale when older than ``max_age_days[source_type]``); one definition of "too old" for
``rag-lab serve``, ``rag-lab health`` and the context. An undated chunk gets no warning (it is
undated, not old). The chunk's text is not changed: the warning is the ``stale_age_days``
metadata field, which ``rag_lab.generator.context`` renders in the header, and the answer stage
counts (per query ``answer_stale_chunks``, ``context/stale_chunks_per_query``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence

from rag_lab.contract.age import AgeRule
from rag_lab.contract.schema import parse_date
from rag_lab.types import Chunk
from rag_lab.validate import OptionError

# the metadata field a warned chunk carries: its age in days
STALE_FIELD = "stale_age_days"


class AgeWarning:
    """Args:
    max_age_days: source type → age in days after which a chunk is stale (``default`` for
        every other type), as ``rag-lab serve --max-age-days``.
    today: the ISO date ages are counted to; ``null`` = the day the run happens (set a date for
        numbers that do not move with the calendar).

    Order and membership are kept: only the stale chunks' metadata gains ``stale_age_days``."""

    def __init__(
        self, max_age_days: Mapping[str, int] | None = None, today: str | None = None
    ) -> None:
        self.rule = AgeRule(dict(max_age_days)) if max_age_days else AgeRule()
        self.today: dt.date | None = None
        if today not in (None, ""):
            self.today = parse_date(today)
            if self.today is None:
                raise OptionError("today", today, "must be an ISO date (YYYY-MM-DD) or null")
        self.stats: dict[str, float] = {}
        self._seen = self._stale = self._queries = self._flagged = 0

    def apply(self, query: str, chunks: Sequence[Chunk]) -> list[Chunk]:
        today = self.today or dt.date.today()
        out: list[Chunk] = []
        stale = 0
        for chunk in chunks:
            if self.rule.stale(chunk.metadata, today):
                age = self.rule.age(chunk.metadata, today)
                meta = {**chunk.metadata, STALE_FIELD: age}
                out.append(dataclasses.replace(chunk, metadata=meta))
                stale += 1
            else:
                out.append(chunk)
        self._queries += 1
        self._seen += len(chunks)
        self._stale += stale
        self._flagged += stale > 0
        self.stats = {
            "stale_per_query": self._stale / self._queries,
            "queries_with_stale": float(self._flagged),
            "stale_share": self._stale / max(self._seen, 1),
        }
        return out


def stale_count(chunks: Sequence[Chunk]) -> int:
    """Chunks of ``chunks`` that carry a freshness warning."""
    return sum(1 for c in chunks if c.metadata.get(STALE_FIELD) is not None)
