"""What an evaluate run logs to its tracker, and when.

The run is opened when the job starts (:func:`evaluation_run`) with its name, its params (the
resolved config; a sweep child: only the overrides the sweep varies, the rest is the parent's)
and its tags, and closed when the job ends: ``FINISHED``, or ``FAILED`` (``KILLED`` on Ctrl-C)
with the error as the ``error`` tag and the files the job had finished logged as artifacts. So
MLflow's duration is the job's. At the end :func:`log_evaluation` logs the metrics, the dataset
as the run's input (digest = rag_lab's fingerprint), the per-query table as an MLflow table and
the run folder's files.

Names:

- a single run says what its configuration is: ``<dataset>/<split> <retrievers>[ <fusion>]
  [ <chunker>-<size>][ qt:<transforms>][ rerank:<model>][ post:<steps>][ gen:<generator>]``,
  e.g. ``maintenance_kb/test bm25+dense(multilingual-e5-small) rrf recursive-800``
  (``run_name=...`` overrides it);
- a sweep child says what the sweep varies for it, unescaped, floats to 4 digits:
  ``fusion.k=37 fusion.weights.dense=0.1915``.

Metric keys in MLflow (:func:`logged_metrics`): a run logs at most :data:`MAX_LOGGED` metrics,
the ones a person reads first, under their ``metrics.json`` names (so ``ndcg_at_10`` is the same
key in the console, ``metrics.json``, MLflow's run table and ``search_runs`` filters): the
headline (``rag_lab.metrics.names.HEADLINE``), the answer headline (``answer/faithfulness``, ...),
``by_category/<c>/ndcg_at_10`` per category (the first :data:`MAX_CATEGORIES`), the timings
(``total_seconds``, ``query_p95_ms``, ...), the counts (``n_queries``, ...) and the sweep's
objective. Every other number goes into the logged table ``tables/metrics.json`` (name, value,
whether it is a metric of the run) and ``metrics/metrics.json``, which stays complete: the gate,
baselines and sweeps read that file. :func:`metrics_json_name` maps a key of a run logged before
(``1_quality/ndcg_at_10``) back to its name.

The experiment gets MLflow's ``mlflow.experimentKind`` tag
(``rag_lab.tracking.mlflow.EXPERIMENT_KIND``) and rag_lab's saved view of its runs table (the
headline metrics as its first columns, ``rag_lab.tracking.mlflow.RUNS_VIEW_TAG``) when it has
none; on a server, ``evaluate`` prints the link that opens the runs in that view (:func:`page_url`;
MLflow 3.17's UI otherwise lands on its GenAI overview, with no metric column on the runs).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from rag_lab.io.atomic import write_atomic
from rag_lab.io.run_folder import (
    ANSWERS_FILE,
    CONFIG_FILE,
    INGEST_REPORT_FILE,
    METRICS_FILE,
    MLFLOW_RUN_FILE,
    PER_QUERY_FILE,
    REPORT_FILE,
    TREC_QRELS_FILE,
    TREC_RUN_FILE,
)

if TYPE_CHECKING:
    import pandas as pd

    from rag_lab.dataset.base import LabelledQueries
    from rag_lab.pipeline.result import RetrievalResult
    from rag_lab.protocols import TrackedRun, Tracker
    from rag_lab.types import Chunk

log = logging.getLogger(__name__)

# (artifact folder, run-folder file): what a run logs of its folder, when the file exists
ARTIFACTS = (
    ("", CONFIG_FILE),
    ("metrics", METRICS_FILE),
    ("tables", PER_QUERY_FILE),
    ("tables", ANSWERS_FILE),
    ("trec", TREC_RUN_FILE),
    ("trec", TREC_QRELS_FILE),
    ("ingest", INGEST_REPORT_FILE),
    ("", REPORT_FILE),
)
TABLE_FILE = "tables/per_query.json"  # the MLflow table (previewable); per_query.parquet is whole
METRICS_TABLE_FILE = "tables/metrics.json"  # every number of metrics.json, as an MLflow table
TABLE_IDS = 10  # retrieved ids kept per query in the MLflow table

# what a run logs as MLflow metrics (logged_metrics): the rest is in tables/metrics.json
MAX_LOGGED = 40
MAX_CATEGORIES = 15  # by_category/<c>/ndcg_at_10 for the first categories, by name
ANSWER_HEADLINE = (
    "answer/faithfulness",
    "answer/faithful_rate",
    "answer/f1",
    "answer/wrong_refusal_rate",
    "answer/n_judge_failures",
)
CATEGORY_HEADLINE = "ndcg_at_10"
TIMING_HEADLINE = (
    "total_seconds",
    "query_p50_ms",
    "query_p95_ms",
    "index_seconds",
    "retrieve_seconds",
    "answer_seconds",
)
COUNT_HEADLINE = (
    "n_queries",
    "n_answerable",
    "n_unanswerable",
    "n_documents",
    "n_chunks",
    "ingest/n_files",
)
# the MLflow chart sections of runs logged before logged_metrics (metrics_json_name reads them)
METRIC_GROUPS = ("quality", "by_category", "timing", "cache", "counts")
_TIMING = re.compile(r"(_seconds|_ms|_per_second)$")
_QUALITY = re.compile(r"_at_\d+$")


def metric_group(name: str) -> str:
    """The :data:`METRIC_GROUPS` entry of a ``metrics.json`` name."""
    last = name.rsplit("/", 1)[-1]
    if name.startswith("by_category/"):
        return "by_category"
    if name.startswith(("cache/", "cache_")):
        return "cache"
    if _TIMING.search(last):
        return "timing"
    if name.startswith(("evidence_", "answer/", "misses_at_")) or _QUALITY.search(last):
        return "quality"
    return "counts"


def mlflow_metric_names(names: Sequence[str] | Mapping[str, Any]) -> dict[str, str]:
    """``{metrics.json name: MLflow name}`` as runs logged them before :func:`logged_metrics`
    (every metric, under a numbered group: ``1_quality/``, ``2_by_category/``, ``3_timing/``,
    ``4_cache/``, ``5_counts/``); :func:`metrics_json_name` reads them back."""
    out = {}
    for name in names:
        group = metric_group(name)
        section = f"{METRIC_GROUPS.index(group) + 1}_{group}"
        rest = name[len(group) + 1 :] if name.startswith(f"{group}/") else name
        out[name] = f"{section}/{rest}"
    return out


def logged_metrics(metrics: Mapping[str, Any], objective: str | None = None) -> dict[str, float]:
    """The :data:`MAX_LOGGED` metrics a run logs to MLflow (module docstring), under their
    ``metrics.json`` names, in reading order; non-numbers and non-finite values left out.
    ``objective``: a sweep's ``optimized_metric`` key, logged too."""
    import math

    from rag_lab.metrics.names import HEADLINE

    def number(key: str) -> bool:
        v = metrics.get(key)
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    categories = sorted(
        {k.split("/")[1] for k in metrics if k.startswith("by_category/") and k.count("/") >= 2}
    )
    wanted = [
        *HEADLINE,
        *ANSWER_HEADLINE,
        *TIMING_HEADLINE,
        *COUNT_HEADLINE,
        *(f"by_category/{c}/{CATEGORY_HEADLINE}" for c in categories[:MAX_CATEGORIES]),
    ]
    if objective and objective not in wanted:
        wanted.insert(0, objective)
    keys = [k for k in dict.fromkeys(wanted) if number(k)][:MAX_LOGGED]
    return {k: float(metrics[k]) for k in keys}


def metrics_table(metrics: Mapping[str, Any], logged: Mapping[str, float]) -> pd.DataFrame:
    """Every number of ``metrics`` as a table (``metric``, ``value``, ``logged``: whether it is
    one of the run's MLflow metrics), in ``metrics.json`` order; NaN left out (``null`` in
    ``metrics.json``)."""
    import math

    import pandas as pd

    rows = [
        {"metric": k, "value": float(v), "logged": k in logged}
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    ]
    return pd.DataFrame(rows, columns=["metric", "value", "logged"])


def metrics_json_name(key: str) -> str:
    """The ``metrics.json`` name of an MLflow key (:func:`mlflow_metric_names` read backwards,
    for code that reads runs from MLflow); a key outside the groups (an older run, a sweep
    parent's ``best/...``) is returned as it is."""
    section, sep, rest = key.partition("/")
    number, _, group = section.partition("_")
    if not (sep and number.isdigit() and group in METRIC_GROUPS):
        return key
    return rest if metric_group(rest) == group else f"{group}/{rest}"


# ------------------------------------------------------------------------------------- names


def _variant(node: Any) -> str:
    """What a stage is, in a word: its model's last path segment when it has one, else its
    class name in snake case without the stage suffix (``RRFFusion`` → ``rrf``,
    ``FixedSizeChunker`` → ``fixed_size``: the ``conf/<group>/<variant>.yaml`` name)."""
    if not isinstance(node, Mapping):
        return str(node)
    model = node.get("model")
    if isinstance(model, str) and model:
        return model.rstrip("/").rsplit("/", 1)[-1]
    target = str(node.get("_target_", "")).rsplit(".", 1)[-1]
    words = re.findall(r"[A-Z]+\d*(?=[A-Z][a-z]|\b)|[A-Z]?[a-z]+\d*|\d+", target)
    return "_".join(w.lower() for w in words[:-1] or words) or "?"


def _dataset_label(cfg: Any) -> str:
    name = OmegaConf.select(cfg, "dataset.name", default=None)
    path = OmegaConf.select(cfg, "dataset.path", default=None)
    return str(name or (Path(str(path)).resolve().name if path else "dataset"))


def single_run_name(cfg: DictConfig | Mapping[str, Any]) -> str:
    """``maintenance_kb/test bm25+dense(multilingual-e5-small) rrf recursive-800``: the dataset,
    split and every stage that is configured (module docstring)."""
    c: Any = cfg
    retrievers = dict(c.get("retrievers") or {})
    names = []
    for name, node in retrievers.items():
        embedder = node.get("embedder") if isinstance(node, Mapping) else None
        names.append(f"{name}({_variant(embedder)})" if embedder else str(name))
    parts = [f"{_dataset_label(c)}/{OmegaConf.select(c, 'dataset.split', default='?')}"]
    parts.append("+".join(names) or "no-retriever")
    if len(retrievers) > 1 and c.get("fusion"):
        parts.append(_variant(c.fusion))
    chunker = c.get("chunker")
    if chunker and _variant(chunker) != "none":
        size = chunker.get("size", chunker.get("max_chars"))
        parts.append(_variant(chunker) + (f"-{size}" if size is not None else ""))
    for label, group in (("qt", "query_transforms"), ("post", "postprocess")):
        steps = c.get(group) or {}
        if steps:
            parts.append(f"{label}:" + "+".join(str(s) for s in steps))
    if c.get("reranker"):
        parts.append(f"rerank:{_variant(c.reranker)}")
    if c.get("generator"):
        parts.append(f"gen:{_variant(c.generator)}")
    return " ".join(parts)


def swept_params(sweep: Mapping[str, Any]) -> dict[str, Any]:
    """The overrides a sweep job's sweep varies, ``{key: typed value}`` (unescaped, no ``+``/``~``;
    Hydra's own grammar: ``rag_lab.report.leaderboard.parse_overrides``)."""
    from rag_lab.report.leaderboard import parse_overrides

    given = parse_overrides(sweep.get("overrides", []))
    swept = sweep.get("swept")
    return {k: v for k, v in given.items() if swept is None or k in swept}


def child_run_name(sweep: Mapping[str, Any]) -> str:
    """``fusion.k=37 fusion.weights.dense=0.1915``: the swept overrides only; ``trial <n>`` when
    the sweep varies nothing this job sets."""
    from rag_lab.report.leaderboard import format_value

    params = swept_params(sweep)
    if not params:
        return f"trial {sweep.get('job')}"
    return " ".join(f"{k}={format_value(v)}" for k, v in params.items())[:250]


# ------------------------------------------------------------------------------------ the run


def _artifacts(out_dir: Path) -> list[tuple[str, Path]]:
    return [(folder, out_dir / name) for folder, name in ARTIFACTS if (out_dir / name).is_file()]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:1000]


@contextmanager
def evaluation_run(
    tracker: Tracker | None,
    cfg: DictConfig,
    resolved: Mapping[str, Any],
    out_dir: Path,
    sweep: Mapping[str, Any] | None = None,
) -> Iterator[TrackedRun | None]:
    """The job's run, open from here to the end of the ``with`` block (``None`` without a
    tracker). Params and start tags are logged now; a block that raises leaves the run
    ``FAILED`` (``KILLED`` for Ctrl-C) with an ``error`` tag and the finished files of
    ``out_dir`` as artifacts; one that ends leaves it ``FINISHED``. ``mlflow_run_id`` is written
    into ``out_dir`` when the run opens."""
    if tracker is None:
        yield None
        return
    tags = {
        "dataset": _dataset_label(cfg),
        "split": str(OmegaConf.select(cfg, "dataset.split", default="")),
        "retrievers": ",".join(str(r) for r in (cfg.get("retrievers") or {})),
    }
    params: Mapping[str, Any] = resolved
    if sweep:  # a child of the sweep's parent run
        check_parent_store(tracker, sweep)
        params = swept_params(sweep)
        tags.update(overrides=" ".join(sweep.get("overrides", [])), sweep_job=str(sweep["job"]))
        name = cfg.get("run_name") or child_run_name(sweep)
    else:
        name = cfg.get("run_name") or single_run_name(cfg)
    run = tracker.start_run(str(name), tags, sweep.get("run_id") if sweep else None)
    _write_run_id(out_dir, run.run_id)  # now: the run page and a failed job name it too
    try:
        run.log_params(params)
        yield run
    except BaseException as exc:
        status = "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED"
        try:
            run.log_artifacts(_artifacts(out_dir))
            run.end(status, {"error": _one_line(exc)})
        except Exception as log_exc:  # the store may be gone: never mask the job's own error
            log.warning("could not mark MLflow run %s %s: %s", run.run_id, status, log_exc)
        raise
    run.end("FINISHED")


def check_parent_store(tracker: Tracker, sweep: Mapping[str, Any]) -> None:
    """Refuse (``ConfigError``) a sweep job whose tracker writes to another store than the one
    its parent run is in (``uri`` in ``sweep_parent.json``): its child would point at a parent
    that store does not have. That happens when the job resolves ``tracking.uri`` where the sweep
    did not: a launcher running it in another folder or on a machine where ``./experiments`` is
    another folder (conf/hydra/launcher/ray.yaml passes the sweep's folders on for that)."""
    from rag_lab.errors import ConfigError
    from rag_lab.protocols import Remote

    parent_uri = sweep.get("uri")
    if not parent_uri or not isinstance(tracker, Remote) or tracker.uri == parent_uri:
        return
    raise ConfigError(
        f"tracking.uri={tracker.uri}: this sweep job's MLflow store is not its parent run's "
        f"({parent_uri}), so its run would be orphaned; the job resolved paths elsewhere than "
        "the sweep (another working directory or machine): give paths.experiments as a folder "
        "every node sees at the same path, or tracking.uri=<an MLflow server>"
    )


def _write_run_id(out_dir: Path, run_id: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / MLFLOW_RUN_FILE, run_id)


def preview_table(table: pd.DataFrame, depth: int = TABLE_IDS) -> pd.DataFrame:
    """The per-query table as MLflow previews it: list columns (retrieved ids) cut to ``depth``
    and joined with spaces, every other column as it is."""
    import numpy as np

    out = table.copy()
    for col in out.columns:
        if out[col].map(lambda v: isinstance(v, (list, tuple, np.ndarray))).any():
            out[col] = out[col].map(
                lambda v: (
                    " ".join(str(x) for x in list(v)[:depth])
                    if isinstance(v, (list, tuple, np.ndarray))
                    else v
                )
            )
    return out


def log_evaluation(
    run: TrackedRun,
    *,
    data: LabelledQueries,
    source: str,
    retrievers: Sequence[str],
    metrics: Mapping[str, float],
    warnings: Sequence[str],
    table: pd.DataFrame,
    out_dir: Path,
    objective: str | None = None,
) -> None:
    """Log a finished evaluation on its open ``run``: the :func:`logged_metrics` (``objective``:
    a sweep's optimized metric key, logged too) with the dataset tags, the dataset as the run's
    input, every number as the table ``tables/metrics.json``, the per-query table and the run
    folder's files."""
    from rag_lab.protocols import DatasetLogging

    tags = {
        "dataset": data.name,
        "split": data.split,
        "dataset_fingerprint": data.fingerprint,
        "retrievers": ",".join(retrievers),
    }
    if warnings:
        tags["data_warnings"] = " | ".join(warnings)[:5000]
    logged = logged_metrics(metrics, objective)
    run.log_metrics(logged, tags)
    if isinstance(run, DatasetLogging):
        profile = {k: metrics[k] for k in ("n_queries", "n_documents", "n_chunks") if k in metrics}
        run.log_dataset(data.name, data.fingerprint, source, data.split, profile)
        run.log_table(metrics_table(metrics, logged), METRICS_TABLE_FILE)
        run.log_table(preview_table(table), TABLE_FILE)
    run.log_artifacts(_artifacts(out_dir))


def page_url(run: TrackedRun) -> str | None:
    """Where a person opens the run's experiment (a server's UI; ``None`` for a sqlite store)."""
    from rag_lab.protocols import Browsable

    return run.page_url() if isinstance(run, Browsable) else None


class PendingTraces:
    """Query traces being written in a background thread (:func:`start_query_traces`):
    :meth:`finish` waits for them and tags the run; :meth:`cancel` writes no further trace."""

    def __init__(self, run: Any, build: Any) -> None:
        import threading

        self.run = run
        self.count = 0
        self.cpu_seconds = 0.0  # the writing thread's own CPU time
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._t0 = 0.0
        self._thread = threading.Thread(
            target=self._write, args=(build,), name="rag-lab-traces", daemon=True
        )

    def _write(self, build: Any) -> None:
        import time

        cpu = time.thread_time()
        try:
            self.count = len(self.run.log_traces(build(), self._stop.is_set))
        except BaseException as exc:  # raised again in the job's thread (finish)
            self.error = exc
        finally:
            self.cpu_seconds = time.thread_time() - cpu

    def start(self) -> PendingTraces:
        import time

        self._t0 = time.perf_counter()
        self._thread.start()
        return self

    def finish(self) -> int:
        """Wait for the writes; tag the run with ``traces`` (the count), ``trace_seconds`` (from
        the start of the writes to their end, overlapping the job's other work) and
        ``trace_cpu_seconds`` (the writing thread's CPU). Returns the count. Writes that failed
        (a store that broke off mid-way) cost the traces, not the run: a warning, the run
        tagged ``traces_error`` (the traces of the transactions committed before stay whole),
        the count ``-1``; the run, its metrics and files end as they would without traces."""
        import time

        self._thread.join()
        if self.error is not None and not isinstance(self.error, Exception):
            raise self.error
        if self.error is not None:
            log.warning(
                "MLflow traces not all written (%s); the run, its metrics and files are complete",
                _one_line(self.error),
            )
            self.run.set_tags({"traces_error": _one_line(self.error)})
            return -1
        seconds = time.perf_counter() - self._t0
        self.run.set_tags(
            {
                "traces": self.count,
                "trace_seconds": f"{seconds:.3f}",
                "trace_cpu_seconds": f"{self.cpu_seconds:.3f}",
            }
        )
        return self.count

    def cancel(self) -> None:
        """The job failed: the trace being written is finished, no other one is started."""
        self._stop.set()
        self._thread.join()


def start_query_traces(
    run: TrackedRun,
    cfg: DictConfig,
    result: RetrievalResult,
    data: LabelledQueries,
    chunks: Mapping[str, Chunk],
    retrievers: Sequence[str],
    answers: Mapping[str, Mapping[str, Any]],
    sweep: bool = False,
) -> PendingTraces | None:
    """A trace per query ``tracking.traces`` selects (``rag_lab.tracking.traces``; ``sweep``: a
    sweep's job) on a run that records traces, built and written in a background thread while
    the job goes on (writing its files, report and the run's own logging: MLflow's store spends
    most of a trace's time in its commit, outside Python's lock). ``None`` when there is nothing
    to write; else call :meth:`PendingTraces.finish` before the run ends (``cancel`` on
    failure)."""
    from rag_lab import __version__
    from rag_lab.protocols import TraceLogging
    from rag_lab.tracking.traces import build_traces, judge_source, selected

    if not isinstance(run, TraceLogging):
        return None
    setting = OmegaConf.select(cfg, "tracking.traces", default="auto")
    ids = selected(setting, list(data.queries), sweep)
    if not ids:
        return None
    judge_cfg = OmegaConf.select(cfg, "judge", default=None) if cfg.get("generator") else None
    judge = judge_source(
        OmegaConf.to_container(judge_cfg, resolve=True) if judge_cfg else None,  # type: ignore[arg-type]
        __version__,
    )

    def build() -> list[Any]:
        return build_traces(ids, result, data, chunks, retrievers, answers, judge, __version__)

    return PendingTraces(run, build).start()
