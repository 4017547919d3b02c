"""Optional capabilities a stage may declare, checked with ``isinstance`` (never probed with
``getattr``). Each stage's own contract lives in ``rag_lab/<stage>/base.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from rag_lab.cache import CacheView


@runtime_checkable
class Identified(Protocol):
    """What defines the stage's output beyond its config (model name + weights hash, ...): part of
    every cache key downstream of the stage."""

    @property
    def identity(self) -> Any: ...


@runtime_checkable
class Measured(Protocol):
    """The stage reports what it cost (seconds, items/s, pairs scored): logged as
    ``<stage>/<key>`` in metrics.json and MLflow."""

    stats: dict[str, float]


@runtime_checkable
class CacheAware(Protocol):
    """The stage keeps per-item results in the stage cache. The pipeline calls
    ``attach_cache(view)`` with a view of ``cache_namespace`` when a cache is configured."""

    cache_namespace: str

    def attach_cache(self, view: CacheView) -> None: ...


@runtime_checkable
class Tracker(Protocol):
    """What the ``tracking`` group builds: ``log_run`` records one run (params, metrics, tags,
    artifact files) and returns its id (``rag_lab.tracking.MlflowTracker``)."""

    def log_run(
        self,
        run_name: str,
        params: Mapping[str, Any],
        metrics: Mapping[str, float],
        tags: Mapping[str, str],
        artifacts: Mapping[str, Path],
        parent_run_id: str | None = None,
    ) -> str: ...


@runtime_checkable
class Remote(Protocol):
    """A stage that talks to a service at ``uri`` says, before any work, whether it is
    reachable: ``check()`` raises a one-line ``ConfigError`` in seconds, or switches to its
    fallback and updates ``uri``."""

    uri: str

    def check(self) -> None: ...
