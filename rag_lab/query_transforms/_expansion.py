"""Term expansion shared by the dictionary and the mined-abbreviation transforms: find the
dictionary's terms in a query and append their equivalents that the query does not already
contain.

A term with Latin letters or digits at an edge matches only where no other letter or digit is
next to that edge (``PLC`` in ``PLC-IO``, not in ``PLCX``); words match in any case, an acronym
(capitals only) only in capitals (``DB`` is not the ``dB`` of ``dB(A)``). A Chinese term matches
as a substring (Chinese has no spaces to anchor on).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence

from rag_lab.text.patterns import term_pattern


def symmetric(table: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """``table`` with every pair read both ways: ``{a: [b]}`` also gives ``{b: [a]}``."""
    out: dict[str, list[str]] = {}
    for term, equivalents in table.items():
        for eq in equivalents:
            for a, b in ((term, eq), (eq, term)):
                if a.casefold() != b.casefold() and b not in out.setdefault(a, []):
                    out[a].append(b)
    return out


class Expander:
    """``table`` maps a term to what it also means (read one way: ``symmetric`` first for both).
    ``additions(text)`` is what ``expand_all`` appends, after a space: each equivalent of each
    term found in ``text`` (longest terms first), skipping equivalents already in the text or
    already added, at most ``max_added`` of them."""

    def __init__(self, table: Mapping[str, Sequence[str]], max_added: int = 8) -> None:
        self.table = {t: list(eqs) for t, eqs in table.items() if t.strip() and eqs}
        self.max_added = max_added
        terms = sorted(self.table, key=lambda t: (-len(t), t))
        self._order = terms
        self._patterns = {t: term_pattern(t) for t in {*terms, *self._all_equivalents()}}

    def _all_equivalents(self) -> Iterable[str]:
        for eqs in self.table.values():
            yield from eqs

    def additions(self, text: str) -> list[str]:
        added: list[str] = []
        for term in self._order:
            if not self._patterns[term].search(text):
                continue
            for eq in self.table[term]:
                if len(added) >= self.max_added:
                    return added
                if eq not in added and not self._patterns[eq].search(text):
                    added.append(eq)
        return added


def expand_all(
    expander: Expander, queries: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, float]]:
    """Every query expanded, and the stats of the batch: ``expanded_share`` (queries that got a
    term), ``added_per_query``, ``ms_per_query``, ``n_terms`` (dictionary entries)."""
    t0 = time.perf_counter()
    out: dict[str, str] = {}
    expanded = added = 0
    for qid, text in queries.items():
        extra = expander.additions(text)
        out[qid] = f"{text} {' '.join(extra)}" if extra else text
        expanded += bool(extra)
        added += len(extra)
    n = max(len(queries), 1)
    stats = {
        "expanded_share": expanded / n,
        "added_per_query": added / n,
        "ms_per_query": 1000 * (time.perf_counter() - t0) / n,
        "n_terms": float(len(expander.table)),
    }
    return out, stats
