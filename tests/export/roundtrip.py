"""What an export's re-score must reproduce of the run it was exported from."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from rag_lab.metrics.names import is_timing

# what the run measured about its machine and its cache, not its output
RUN_ONLY = ("cache", "ingest/", "n_documents_parsed")


def comparable(key: str) -> bool:
    last = key.rsplit("/", 1)[-1]
    return (
        not is_timing(key)
        and not key.startswith(RUN_ONLY)
        and "cache" not in last
        and last not in ("index_loaded", "embedded_chunks")
        and not last.endswith("_calls")  # work done (a cached verdict is no call), not an output
    )


def assert_same_outputs(run: Mapping[str, float], rescored: Mapping[str, float]) -> None:
    """Every output metric of ``run`` (all but timings, cache and ingest counters) is in
    ``rescored`` with the same value to 4 decimals."""
    missing = sorted(k for k in run if comparable(k) and k not in rescored)
    assert missing == [], missing[:20]
    for key, value in run.items():
        if comparable(key):
            assert rescored[key] == pytest.approx(value, abs=1e-4, nan_ok=True), key
