"""Counting what a run returned that its principals may not read: the ``permission_leaks`` check
(must be 0), computed from the runs themselves, apart from the retrieval-time filter it checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_lab.access.base import AccessPolicy
from rag_lab.access.principal import PRINCIPAL_FIELD
from rag_lab.types import Chunk, Run


def leaks_per_query(
    runs: Mapping[str, Run],
    chunks: Mapping[str, Chunk],
    metadata: Mapping[str, Mapping[str, Any]],
    policy: AccessPolicy,
) -> dict[str, int]:
    """Per query id: how many distinct chunks any of ``runs`` (every stage's run and the final
    one) returned for it that ``policy`` says its principal cannot read. A chunk id that is not
    in ``chunks`` counts as a leak (nothing vouches for it)."""
    out: dict[str, int] = {}
    for qid, meta in metadata.items():
        principal = meta.get(PRINCIPAL_FIELD)
        seen = {c for run in runs.values() for c in (run.get(qid) or {})}
        out[qid] = sum(
            1 for c in seen if c not in chunks or not policy.readable(chunks[c], principal)
        )
    return out
