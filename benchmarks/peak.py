"""Peak resident memory of a benchmark: this process and the child processes it waited for (the
``rag-lab`` commands some benchmarks run), in MiB. Every benchmark writes it into its result."""

from __future__ import annotations

import resource


def peak_rss_mib() -> dict[str, float]:
    """``{"self": ..., "children": ...}``; ``children`` is the largest single waited-for child
    (``getrusage`` reports the maximum, not a sum), 0 when there was none."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"self": round(own, 1), "children": round(kids, 1)}
