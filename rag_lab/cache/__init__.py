"""The stage cache: one owner of keys (``keys``), storage (``store``) and namespaces.

Stages never open a cache: the pipeline hands each ``CacheAware`` stage a ``CacheView`` of its
namespace. ``rag-lab cache list|clear`` and the run's counters see every namespace.
"""

from rag_lab.cache.keys import canonical, content_key, stage_key
from rag_lab.cache.store import (
    NAMESPACES,
    ON_ERROR,
    CacheError,
    CacheView,
    StageCache,
    clean_stale,
    clear,
    diff_stats,
    inventory,
    memo,
    open_cache,
)

__all__ = [
    "NAMESPACES",
    "ON_ERROR",
    "CacheError",
    "CacheView",
    "StageCache",
    "canonical",
    "clean_stale",
    "clear",
    "content_key",
    "diff_stats",
    "inventory",
    "memo",
    "open_cache",
    "stage_key",
]
