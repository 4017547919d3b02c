"""Multi-turn query sets: how a query says which conversation it continues.

A query in ``queries.jsonl`` gives its previous turns in one of two ways (never both):

- ``metadata.history``: the previous user turns themselves, oldest first (a list of strings);
- ``metadata.conversation_id`` + ``metadata.turn`` (1, 2, 3, ...): the loader fills ``history``
  with the texts of the same conversation's earlier turns, in turn order, from the same file.

Only the user's turns are history: no answers, no retrieved chunks, so nothing the pipeline
retrieved for one turn can reach the next (``rag_lab.query_transforms.history``). Bad input is one
line naming ``file:line`` and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag_lab.errors import DataError
from rag_lab.types import Query


def _history(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(t, str) and t.strip() for t in value):
        raise DataError(
            f"{where}: metadata.history must be a list of non-empty strings (the previous user "
            "turns, oldest first)"
        )
    return list(value)


def _turn(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(f"{where}: metadata.turn must be an integer >= 1, got {value!r}")
    return value


def resolve_history(
    queries: Mapping[str, Query], lines: Mapping[str, int], path: Path
) -> dict[str, Query]:
    """``queries`` (all of a file, ``lines``: each id's line) with ``metadata.history`` checked, or
    filled from ``conversation_id`` + ``turn``. A conversation's turns must be 1..n, each once."""
    turns: dict[str, dict[int, str]] = {}
    for qid, q in queries.items():
        where = f"{path}:{lines[qid]}"
        meta = q.metadata
        if "history" in meta:
            if "conversation_id" in meta or "turn" in meta:
                raise DataError(
                    f"{where}: give metadata.history or metadata.conversation_id + turn, not both"
                )
            _history(meta["history"], where)
            continue
        if ("conversation_id" in meta) != ("turn" in meta):
            missing = "turn" if "conversation_id" in meta else "conversation_id"
            raise DataError(f"{where}: metadata.{missing} is missing (a turn needs both)")
        if "conversation_id" not in meta:
            continue
        conv = meta["conversation_id"]
        if not isinstance(conv, (str, int)) or isinstance(conv, bool) or not str(conv).strip():
            raise DataError(f"{where}: metadata.conversation_id must be a non-empty string")
        turn = _turn(meta["turn"], where)
        seen = turns.setdefault(str(conv), {})
        if turn in seen:
            raise DataError(
                f"{where}: conversation {conv!r} has turn {turn} twice "
                f"(first at {path}:{lines[seen[turn]]})"
            )
        seen[turn] = qid
    out = dict(queries)
    for conv, by_turn in turns.items():
        order = sorted(by_turn)
        if order != list(range(1, len(order) + 1)):
            gap = next(t for t in range(1, order[-1] + 1) if t not in by_turn)
            last = by_turn[order[-1]]
            raise DataError(
                f"{path}:{lines[last]}: conversation {conv!r} has no turn {gap} "
                f"(turns: {', '.join(map(str, order))})"
            )
        for t in order[1:]:
            q = queries[by_turn[t]]
            history = [queries[by_turn[p]].text for p in order if p < t]
            out[q.query_id] = Query(q.query_id, q.text, {**q.metadata, "history": history})
    return out
