"""Validity windows: keep only chunks whose document is valid on a given date."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from rag_lab.errors import ConfigError
from rag_lab.ranking import ranked
from rag_lab.types import Chunk, Run


def _date(value: object, what: str) -> dt.date | None:
    if value is None or value == "":
        return None
    try:
        return dt.date.fromisoformat(str(value)[:10])
    except ValueError:
        raise ConfigError(f"{what}: {value!r} is not an ISO date (YYYY-MM-DD)") from None


class FreshnessFilter:
    """Args:
    as_of: the date (ISO) answers must be valid on; a chunk whose document's
        ``[valid_from, valid_to]`` (metadata contract; either end open when absent) excludes it
        is expired or not yet valid.
    mode: ``drop`` removes such chunks; ``demote`` moves them below every valid chunk, in
        their original order (a soft rule: recall is kept, the head is cleaned).
    """

    def __init__(self, as_of: str, mode: str = "drop") -> None:
        if mode not in ("drop", "demote"):
            raise ConfigError(f"postprocess.freshness.mode must be drop or demote, got {mode!r}")
        as_of_date = _date(as_of, "postprocess.freshness.as_of")
        if as_of_date is None:
            raise ConfigError("postprocess.freshness.as_of is required (an ISO date)")
        self.as_of, self.mode = as_of_date, mode
        self.stats: dict[str, float] = {}

    def valid(self, chunk: Chunk) -> bool:
        start = _date(chunk.metadata.get("valid_from"), f"{chunk.doc_id}: valid_from")
        end = _date(chunk.metadata.get("valid_to"), f"{chunk.doc_id}: valid_to")
        return (start is None or start <= self.as_of) and (end is None or self.as_of <= end)

    def process(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run:
        out: Run = {}
        removed = 0
        for qid, scores in run.items():
            order = ranked(scores)
            keep = [c for c in order if self.valid(chunks[c])]
            kept = set(keep)
            rest = [c for c in order if c not in kept] if self.mode == "demote" else []
            removed += len(order) - len(keep)
            # rank-preserving scores: valid chunks first, then (demote) the others
            final = keep + rest
            out[qid] = {c: float(len(final) - i) for i, c in enumerate(final)}
        self.stats = {"invalid_per_query": removed / max(len(run), 1)}
        return out
