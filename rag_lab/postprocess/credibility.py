"""Credibility: a rule score per chunk, and the chunks below a threshold dropped or demoted.

Three signals, each 0 or 1, combined as a weighted mean (``weights``; a weight of 0 turns its
signal off) into ``[0, 1]``:

- ``dated``: the chunk's metadata carries an ISO date in one of ``date_fields`` (the contract's
  ``valid_from``, a ticket's ``opened``, a file's ``created``).
- ``allowed``: its ``source_type`` is in ``allowed_source_types``, or its ``source`` (the file
  path relative to the corpus) starts with one of ``allowed_sources``.
- ``corroborated``: another document among the query's top ``corroboration_n`` chunks states one
  of the same facts: a statement about the same entity with the same values (the conflict
  detector's definitions, ``rag_lab.postprocess.conflicts``: "3000 h" and "3000小时" agree).

The rest of the ranking is kept: ``drop`` removes the chunks under ``threshold`` (a query it
would empty keeps its run, counted as ``emptied_queries``), ``demote`` moves them below every
other chunk, each group in its original order.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.postprocess.conflicts import disagreement, same_entity, statements
from rag_lab.ranking import ranked
from rag_lab.types import Chunk, Run
from rag_lab.validate import OptionError, choice, integer, number

SIGNALS = ("dated", "allowed", "corroborated")
MODES = ("drop", "demote")


def _is_date(value: Any) -> bool:
    if value is None or value == "":
        return False
    try:
        dt.date.fromisoformat(str(value)[:10])
    except ValueError:
        return False
    return True


class CredibilityFilter:
    """Args:
    weights: signal (``dated``, ``allowed``, ``corroborated``) → weight ``>= 0``; the score is
        the weighted mean of the signals that hold.
    threshold: chunks scoring below it are dropped or demoted (``0``: none).
    mode: ``drop`` | ``demote``.
    allowed_source_types: ``source_type`` values that count as allow-listed.
    allowed_sources: ``source`` prefixes that count as allow-listed (``manuals/``).
    date_fields: metadata fields read for an explicit date, in order.
    corroboration_n: how many of a query's best chunks are searched for a second document stating
        the same fact.
    min_label_tokens: as in the conflict detector (what names an entity).
    """

    def __init__(
        self,
        weights: Mapping[str, float] | None = None,
        threshold: float = 0.5,
        mode: str = "demote",
        allowed_source_types: Sequence[str] = ("manual", "release_note"),
        allowed_sources: Sequence[str] = (),
        date_fields: Sequence[str] = ("valid_from", "date", "opened", "created"),
        corroboration_n: int = 10,
        min_label_tokens: int = 4,
    ) -> None:
        given = dict(weights or dict.fromkeys(SIGNALS, 1.0))
        unknown = sorted(set(given) - set(SIGNALS))
        if unknown:
            raise OptionError(f"weights.{unknown[0]}", given[unknown[0]], f"not one of {SIGNALS}")
        self.weights = {s: number(given.get(s, 0.0), f"weights.{s}", ge=0) for s in SIGNALS}
        if not sum(self.weights.values()):
            raise OptionError("weights", given, "at least one weight must be > 0")
        self.threshold = number(threshold, "threshold", ge=0)
        self.mode = choice(mode, "mode", MODES)
        self.allowed_source_types = {str(s) for s in allowed_source_types}
        self.allowed_sources = tuple(str(s) for s in allowed_sources)
        self.date_fields = tuple(str(f) for f in date_fields)
        self.corroboration_n = integer(corroboration_n, "corroboration_n", ge=1)
        self.min_label_tokens = integer(min_label_tokens, "min_label_tokens", ge=1)
        self.stats: dict[str, float] = {}

    def signals(self, chunk: Chunk, others: Sequence[Chunk]) -> dict[str, bool]:
        """The three signals of ``chunk`` among ``others`` (the query's top chunks)."""
        meta = chunk.metadata
        source = str(meta.get("source") or "")
        return {
            "dated": any(_is_date(meta.get(f)) for f in self.date_fields),
            "allowed": str(meta.get("source_type")) in self.allowed_source_types
            or any(source.startswith(p) for p in self.allowed_sources),
            "corroborated": self.weights["corroborated"] > 0 and self.corroborated(chunk, others),
        }

    def corroborated(self, chunk: Chunk, others: Sequence[Chunk]) -> bool:
        """Another document of ``others`` states a fact of ``chunk``'s with the same values."""
        mine = statements(chunk.text, self.min_label_tokens)
        if not mine:
            return False
        for other in others:
            if other.doc_id == chunk.doc_id:
                continue
            for a in mine:
                for b in statements(other.text, self.min_label_tokens):
                    if (
                        same_entity(a, b)
                        and set(a.values) & set(b.values)
                        and disagreement(a, b) is None
                    ):
                        return True
        return False

    def assess(self, chunk: Chunk, others: Sequence[Chunk]) -> dict[str, float]:
        """``{"credibility": score}`` (``ChunkAssessing``: a served chunk carries it)."""
        return {"credibility": self.score(chunk, others)}

    def score(self, chunk: Chunk, others: Sequence[Chunk]) -> float:
        held = self.signals(chunk, others)
        total = sum(self.weights.values())
        return sum(w for s, w in self.weights.items() if held[s]) / total

    def process(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run:
        t0 = time.perf_counter()
        out: Run = {}
        low = emptied = 0
        mean = 0.0
        for qid, scores in run.items():
            order = ranked(scores)
            top = [chunks[c] for c in order[: self.corroboration_n]]
            cred = {c: self.score(chunks[c], top) for c in order}
            mean += sum(cred.values()) / max(len(cred), 1)
            keep = [c for c in order if cred[c] >= self.threshold]
            rest = [c for c in order if cred[c] < self.threshold]
            low += len(rest)
            if self.mode == "drop":
                if order and not keep:
                    emptied += 1
                    keep, rest = order, []
                out[qid] = {c: scores[c] for c in keep}
            else:  # rank-preserving scores: credible chunks first, then the others
                final = keep + rest
                out[qid] = {c: float(len(final) - i) for i, c in enumerate(final)}
        n = max(len(run), 1)
        self.stats = {
            "below_threshold_per_query": low / n,
            "mean_score": mean / n,
            "emptied_queries": float(emptied),
            "ms_per_query": 1000 * (time.perf_counter() - t0) / n,
        }
        return out
