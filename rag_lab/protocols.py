"""Optional capabilities a stage may declare, checked with ``isinstance`` (never probed with
``getattr``). Each stage's own contract lives in ``rag_lab/<stage>/base.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, TypeVar, runtime_checkable

_T = TypeVar("_T")

_IMPLEMENTS: dict[tuple[type, type], bool] = {}

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from pathlib import Path

    import pandas as pd

    from rag_lab.cache import CacheView
    from rag_lab.types import Chunk


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
class CachesOwnRuns(Protocol):
    """A retriever whose run is not the whole of its output: a foreign component's source-mapping
    counts, per-query annotations and (end to end) answers. The pipeline does not cache its run
    (a cached run would bring back none of these); the stage caches each query's output itself,
    in its ``CacheAware`` namespace (``rag_lab/retrievers/_adapter.py``)."""

    caches_own_runs: bool


@runtime_checkable
class CorpusFitted(Protocol):
    """The stage learns something from the corpus (a query transform that mines abbreviation
    definitions): the pipeline calls ``fit(chunks)`` every time the corpus is set (after chunking,
    or when an export is restored), before any query is run. What ``fit`` learns must be a pure
    function of the chunks, so a rerun over the same chunks behaves the same."""

    def fit(self, chunks: Sequence[Chunk]) -> None: ...


@runtime_checkable
class QueryMetadataAware(Protocol):
    """The stage reads fields of each query's metadata (``as_of``), not only its text. Before
    every ``Pipeline.run`` the pipeline calls ``set_query_metadata({query_id: {field: value}})``
    with the fields named in ``query_metadata_fields`` (only those, and ``{}`` for a query without
    them; also when the run was given no metadata, so nothing carries over from an earlier run).
    A cached stage output (a retriever run) that such a stage produces is keyed by these values
    too (``rag_lab.cache.keys.run_key``)."""

    query_metadata_fields: tuple[str, ...]

    def set_query_metadata(self, metadata: Mapping[str, Mapping[str, Any]]) -> None: ...


@runtime_checkable
class Annotating(Protocol):
    """The stage says something about a query besides its ranking (the conflict detector: two of
    its top chunks disagree). After each ``process``, ``annotations`` maps a query id to
    ``{name: JSON-able value}`` for the queries it has something to say about (only those); the
    pipeline collects them into ``RetrievalResult.annotations[query_id][name]`` (a later stage's
    name wins over an earlier one's) and evaluate writes each name as a per-query column and
    counts it (``rag_lab.metrics.score.annotation_metrics``). ``annotation_names``: the names it
    may write, so that a stage that flagged nothing is counted as 0."""

    annotation_names: tuple[str, ...]
    annotations: Mapping[str, Mapping[str, Any]]


@runtime_checkable
class ChunkAssessing(Protocol):
    """The stage can say how far to trust one chunk among a query's top chunks (the credibility
    filter: ``{"credibility": 0.67}``), for a served reply to carry per chunk; below
    ``threshold`` a chunk is not to be trusted."""

    threshold: float

    def assess(self, chunk: Chunk, others: Sequence[Chunk]) -> Mapping[str, float]: ...


@runtime_checkable
class TrackedRun(Protocol):
    """An open run of a :class:`Tracker`: logged to as the job goes, closed by ``end`` with the
    job's status (``FINISHED`` | ``FAILED`` | ``KILLED``)."""

    run_id: str

    def log_params(
        self, params: Mapping[str, Any], tags: Mapping[str, Any] | None = None
    ) -> None: ...

    def log_metrics(
        self, metrics: Mapping[str, Any], tags: Mapping[str, Any] | None = None
    ) -> None: ...

    def set_tags(self, tags: Mapping[str, Any]) -> None: ...

    def log_artifacts(self, artifacts: Mapping[str, Path] | Iterable[tuple[str, Path]]) -> None: ...

    def end(self, status: str = "FINISHED", tags: Mapping[str, Any] | None = None) -> None: ...


@runtime_checkable
class DatasetLogging(Protocol):
    """A :class:`TrackedRun` that records the run's input dataset (``name``, ``digest`` = rag_lab's
    fingerprint, ``source`` path, ``context`` = the split, ``profile`` counts) and previewable
    tables (MLflow: ``log_input``, ``log_table``)."""

    def log_dataset(
        self,
        name: str,
        digest: str,
        source: str,
        context: str,
        profile: Mapping[str, Any] | None = None,
    ) -> None: ...

    def log_table(self, table: pd.DataFrame, artifact_file: str) -> None: ...


@runtime_checkable
class TraceLogging(Protocol):
    """A :class:`TrackedRun` that records a trace per query (``rag_lab.tracking.traces``
    records; MLflow: traces with spans and assessments, linked to the run) and returns their
    ids."""

    def log_traces(
        self, traces: Sequence[Any], stop: Callable[[], bool] | None = None
    ) -> list[str]: ...


@runtime_checkable
class Browsable(Protocol):
    """A :class:`TrackedRun` whose runs a person opens in a UI: ``page_url()`` is the link that
    shows them as rag_lab means them (MLflow: the runs table with the headline columns), ``None``
    when its store has no UI of its own."""

    def page_url(self) -> str | None: ...


@runtime_checkable
class Tracker(Protocol):
    """What the ``tracking`` group builds: ``start_run`` opens a run when a job starts and returns
    it (:class:`TrackedRun`); ``log_run`` records a finished one in one go and returns its id
    (``rag_lab.tracking.MlflowTracker``)."""

    def start_run(
        self,
        run_name: str,
        tags: Mapping[str, str] | None = None,
        parent_run_id: str | None = None,
    ) -> TrackedRun: ...

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


def implements(stage: object, capability: type[_T]) -> TypeGuard[_T]:
    """``isinstance(stage, capability)`` remembered per (class, capability): a capability belongs
    to a stage's class (its instances set the members in ``__init__``). A runtime-checkable
    Protocol's ``isinstance`` inspects every member each time (~50 µs on Python 3.11): nine per
    served query were a sixth of its time."""
    key = (type(stage), capability)
    found = _IMPLEMENTS.get(key)
    if found is None:
        found = _IMPLEMENTS[key] = isinstance(stage, capability)
    return found
