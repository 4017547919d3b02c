"""A run as a report reads it: the run folder's files, plus the labels the drill-down shows.

A run folder holds scores and ids (``metrics.json``, ``per_query.parquet`` with the top retrieved
chunk ids, ``config_resolved.yaml``), not chunk texts or gold evidence. :class:`Labels` carries
those: ``evaluate`` has them in memory and passes them; otherwise :func:`rebuild_labels` loads the
dataset split and re-chunks the corpus from the resolved config (parse and chunk read from the
stage cache when it is there: well under a second on the sample dataset). When that fails (the
dataset moved, a model is missing) the report is still written, with ids only and a note saying
why.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_lab._deprecated import upgrade_targets
from rag_lab.analysis.stats import paired_bootstrap_ci
from rag_lab.errors import ConfigError
from rag_lab.io import run_folder as outputs
from rag_lab.io.yaml_text import load_own
from rag_lab.metrics.names import HEADLINE
from rag_lab.types import Chunk, Qrels, Query

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Labels:
    """What the drill-down shows beside a ranking: every chunk by id, the split's queries (gold
    answer / evidence strings in their metadata) and its qrels."""

    chunks: Mapping[str, Chunk]
    queries: Mapping[str, Query]
    qrels: Qrels


# eq=False: a DataFrame field makes == ambiguous
@dataclass(frozen=True, eq=False)
class RunView:
    """One evaluate run. ``ref`` is what the user named (folder or MLflow id); ``config`` the
    resolved config (``None`` if the folder has none); ``labels`` ``None`` with ``labels_note``
    saying why when chunk texts could not be had."""

    ref: str
    metrics: Mapping[str, Any]
    per_query: pd.DataFrame
    config: Mapping[str, Any] | None
    fingerprint: str | None
    labels: Labels | None = None
    labels_note: str = ""

    @property
    def dataset(self) -> str | None:
        return _select(self.config, "dataset", "name")

    @property
    def split(self) -> str | None:
        return _select(self.config, "dataset", "split")

    @property
    def mlflow_run_id(self) -> str | None:
        value = self.metrics.get("_run_id")
        return str(value) if value else None


def _select(config: Mapping[str, Any] | None, *path: str) -> Any:
    node: Any = config
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def headline(metrics: Mapping[str, Any], per_query: pd.DataFrame) -> list[str]:
    """The :data:`HEADLINE` metrics this run has per-query scores for, in that order; then the
    evidence ones the dataset supports (``evidence_hit_rate_at_5`` ...)."""
    names = [m for m in HEADLINE if m in per_query.columns]
    names += [m for m in ("evidence_hit_rate_at_5", "evidence_mrr_at_10") if m in per_query.columns]
    return names


def metric_cis(
    per_query: pd.DataFrame, names: Sequence[str], n_resamples: int = 2000, alpha: float = 0.05
) -> dict[str, tuple[float, float, float]]:
    """``{metric: (mean, low, high)}``: the percentile bootstrap CI of each per-query mean (NaN
    skipped, so the mean is ``metrics.json``'s)."""
    return {
        m: paired_bootstrap_ci(per_query[m].to_numpy(dtype=np.float64), n_resamples, alpha)
        for m in names
    }


# ---------------------------------------------------------------------------------------------
# reading


def read_run_folder(folder: Path, ref: str | None = None) -> RunView:
    """A run folder's ``metrics.json``, ``per_query.parquet``, ``config_resolved.yaml``,
    ``dataset_fingerprint`` and ``mlflow_run_id``. Raises :class:`ConfigError` naming the
    folder when it is not an evaluate run folder."""
    metrics_file = folder / outputs.METRICS_FILE
    table_file = folder / outputs.PER_QUERY_FILE
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such run folder")
    for need in (metrics_file, table_file):
        if not need.is_file():
            raise ConfigError(f"{folder}: no {need.name} (not a rag-lab evaluate run folder)")
    try:
        metrics = outputs.read_metrics(metrics_file)
    except ValueError as exc:  # bad JSON or not an object
        raise ConfigError(f"{metrics_file}: cannot read metrics ({exc})") from None
    try:
        per_query = pd.read_parquet(table_file)
    except Exception as exc:  # pyarrow's errors: a truncated or foreign file
        raise ConfigError(f"{table_file}: cannot read the per-query table ({exc})") from None
    config_file = folder / outputs.CONFIG_FILE
    config = load_own(config_file.read_text(encoding="utf-8")) if config_file.is_file() else None
    if isinstance(config, dict):  # a run of an earlier release may name moved classes
        config = upgrade_targets(config)
    fp_file = folder / outputs.FINGERPRINT_FILE
    fingerprint = fp_file.read_text(encoding="utf-8").strip() if fp_file.is_file() else None
    run_id_file = folder / outputs.MLFLOW_RUN_FILE
    if run_id_file.is_file():
        metrics = {**metrics, "_run_id": run_id_file.read_text(encoding="utf-8").strip()}
    return RunView(ref or str(folder), metrics, per_query, config, fingerprint or None)


def load_run(ref: str | Path, tracking_uri: str | None = None) -> RunView:
    """A run folder, or an MLflow run id logged by ``rag-lab evaluate`` (its artifacts fetched with
    :func:`rag_lab.tracking.fetch.download_run`). Raises :class:`ConfigError` with one line."""
    path = Path(ref)
    if path.is_file() and path.name == outputs.METRICS_FILE:
        path = path.parent
    if path.exists():
        return read_run_folder(path, str(ref))
    text = str(ref)
    if not text.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(f"{text}: no such run folder, and not an MLflow run id")
    from rag_lab.tracking.fetch import download_run, resolve_tracking_uri

    with tempfile.TemporaryDirectory(prefix="rag_lab_report_") as tmp:
        try:
            folder = download_run(text, resolve_tracking_uri(tracking_uri), Path(tmp))
        except Exception as exc:  # ours (no such run) or the store's (unknown id, bad URI)
            why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise ConfigError(
                f"{text}: not a run folder, nor a usable MLflow run id: {why}"
            ) from None
        return read_run_folder(folder, text)


def rebuild_labels(config: Mapping[str, Any]) -> Labels:
    """The split's queries and qrels and the corpus's chunks, rebuilt from a resolved config
    (:func:`rag_lab.pipeline.build.build_dataset`, ``Pipeline.load_corpus``: cached stages are read
    back; no index is built, no model loaded)."""
    from omegaconf import OmegaConf

    from rag_lab.pipeline import build

    cfg = OmegaConf.create(dict(config))
    data = build.build_dataset(cfg).load()
    pipe = build.build_pipeline(cfg)
    pipe.load_corpus(
        data.corpus_sources,
        data.corpus_root,
        data.corpus_fingerprint,
        data.on_empty,
        data.corpus_left_out,
    )
    # with a fallback chain, its levels' corpora too (what the run could return)
    return Labels(pipe.all_chunks, data.queries, data.qrels)


def with_labels(run: RunView, labels: Labels | None = None) -> RunView:
    """``run`` with its :class:`Labels`: the given ones, else rebuilt from its config; on failure
    the run comes back without, ``labels_note`` saying why."""
    if labels is not None:
        return _replace(run, labels, "")
    if not run.config:
        return _replace(run, None, "no config_resolved.yaml: chunk texts and gold are not shown")
    try:
        return _replace(run, rebuild_labels(run.config), "")
    except Exception as exc:  # any failure here costs the drill-down texts, never the report
        why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        log.warning("report without chunk texts: %s", why)
        return _replace(run, None, f"chunk texts and gold not shown: {why}")


def _replace(run: RunView, labels: Labels | None, note: str) -> RunView:
    return RunView(run.ref, run.metrics, run.per_query, run.config, run.fingerprint, labels, note)


def as_float(value: Any) -> float:
    """A cell as float (NaN for None, strings and other non-numbers)."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def ids(value: Any) -> list[str]:
    """A ``retrieved_*_ids`` cell (numpy array, list or None) as a list of str."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return [str(v) for v in value]
