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

Metric keys in MLflow (:func:`mlflow_metric_names`): the ``metrics.json`` name under a numbered
group, so MLflow's chart sections (which it sorts by name, before its own "Model metrics") read
headline first: ``1_quality/`` (ranking, evidence and answer metrics, miss reasons),
``2_by_category/``, ``3_timing/`` (``*_seconds``, ``*_ms``, ``*_per_second``), ``4_cache/``,
``5_counts/`` (sizes, ingest counts, stage counters). A name already under its group keeps it once
(``by_category/口语/ndcg_at_10`` → ``2_by_category/口语/ndcg_at_10``, ``cache/runs/hits`` →
``4_cache/runs/hits``). ``metrics.json`` keeps its names: the gate, baselines and sweeps read it.
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
    from rag_lab.protocols import TrackedRun, Tracker

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
TABLE_IDS = 10  # retrieved ids kept per query in the MLflow table

# MLflow chart sections, in reading order (MLflow sorts sections by name)
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
    """``{metrics.json name: MLflow name}``: the name under its numbered group (module
    docstring)."""
    out = {}
    for name in names:
        group = metric_group(name)
        section = f"{METRIC_GROUPS.index(group) + 1}_{group}"
        rest = name[len(group) + 1 :] if name.startswith(f"{group}/") else name
        out[name] = f"{section}/{rest}"
    return out


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
) -> None:
    """Log a finished evaluation on its open ``run``: metrics (grouped names:
    :func:`mlflow_metric_names`) with the dataset tags, the dataset as the run's input, the
    per-query table and the run folder's files."""
    from rag_lab.protocols import DatasetLogging

    tags = {
        "dataset": data.name,
        "split": data.split,
        "dataset_fingerprint": data.fingerprint,
        "retrievers": ",".join(retrievers),
    }
    if warnings:
        tags["data_warnings"] = " | ".join(warnings)[:5000]
    names = mlflow_metric_names(metrics)
    run.log_metrics({names[k]: v for k, v in metrics.items()}, tags)
    if isinstance(run, DatasetLogging):
        profile = {k: metrics[k] for k in ("n_queries", "n_documents", "n_chunks") if k in metrics}
        run.log_dataset(data.name, data.fingerprint, source, data.split, profile)
        run.log_table(preview_table(table), TABLE_FILE)
    run.log_artifacts(_artifacts(out_dir))
