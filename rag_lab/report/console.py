"""What a rag_lab command shows on its console.

- stdout carries results: ``rag-lab evaluate``'s headline metrics, per-category table and where
  the outputs went (:func:`show_run`); inside a multirun one line per job (:func:`job_line`)
  unless ``verbose=true``. Counts print as integers, a stage the run did not have (a NaN, e.g.
  an encoder rate in a BM25-only run) is left out, columns are aligned by display width (a
  Chinese character takes two cells).
- stderr carries logs: rag_lab's own INFO lines and every library's warnings. Libraries' INFO
  lines (sentence-transformers, MLflow, httpx, faiss, bm25s, Hydra's launcher) stay in the run's
  log file unless ``verbose=true``: :class:`LibraryFilter`, installed on the console handlers by
  ``conf/hydra/default.yaml`` through :func:`console_filter`, which also applies
  ``progress=auto|true|false`` (``rag_lab.runtime.progress``).
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_lab.errors import DISK_ERRNOS
from rag_lab.metrics.names import HEADLINE, is_count, metric_key

RUN_SUMMARY = (
    "n_queries",
    "n_unanswerable",
    "index_seconds",
    "query_p50_ms",
    "query_p95_ms",
    "embed_docs_per_second",
    "cache_hits",
    "cache_misses",
)
CATEGORY_COLUMNS = ("hit_rate_at_5", "noise_ratio_at_5", "ndcg_at_10")
# the metrics of a multirun job's one line (after the optimised one): quality, then deep recall
JOB_METRICS = ("ndcg_at_10", "hit_rate_at_5", "noise_ratio_at_5", "recall_at_100")
# loggers whose INFO lines reach the console without verbose=true
OWN_LOGGERS = ("rag_lab", "__main__")


def _width(text: str) -> int:
    """Display width in terminal cells (a CJK character takes two). Printable ASCII is one cell
    a character, as ``wcswidth`` says, without importing wcwidth (~0.1 s of every run's table)."""
    if text.isascii() and text.isprintable():
        return len(text)
    from wcwidth import wcswidth

    w = wcswidth(text)
    return w if w >= 0 else len(text)


def _pad(text: str, width: int, right: bool = False) -> str:
    fill = " " * max(width - _width(text), 0)
    return fill + text if right else text + fill


def _absent(value: Any) -> bool:
    """A value the run does not have: ``None`` (``null`` in metrics.json) or NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _value(key: str, value: Any) -> str:
    """Counts (``rag_lab.metrics.names.is_count``) as integers, other numbers with 4 decimals."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)) and is_count(key) and float(value).is_integer():
        return str(int(value))
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def format_table(
    metrics: Mapping[str, Any], keys: Sequence[str], marked: Collection[str] = ()
) -> str:
    """``key  value`` lines, values in one column; keys the run lacks and values that are NaN or
    ``None`` (a stage the run did not have, e.g. an encoder rate in a BM25-only run) are left
    out; counts print as integers; a key of ``marked`` starts with ``*``."""
    shown = [k for k in dict.fromkeys(keys) if k in metrics and not _absent(metrics[k])]
    width = max((_width(k) for k in shown), default=0)
    return "\n".join(
        f"{'* ' if k in marked else '  '}{_pad(k, width)}  {_value(k, metrics[k])}" for k in shown
    )


def category_table(metrics: Mapping[str, Any]) -> str:
    """One row per query category (names aligned by display width, so Chinese ones line up)."""
    cats = sorted({k.split("/")[1] for k in metrics if k.startswith("by_category/")})
    cols = [c for c in CATEGORY_COLUMNS if any(f"by_category/{cat}/{c}" in metrics for cat in cats)]
    if not cats or not cols:
        return ""
    first = max(14, *(_width(c) + 2 for c in cats))
    lines = ["  " + _pad("category", first) + "".join(f"{c:>18}" for c in cols)]
    for cat in cats:
        vals = [metrics.get(f"by_category/{cat}/{c}") for c in cols]
        cells = "".join(_pad("-" if _absent(v) else f"{v:.3f}", 18, right=True) for v in vals)
        lines.append("  " + _pad(cat, first) + cells)
    return "\n".join(lines)


def title(dataset: str, split: str, pipe: Any) -> str:
    """``<dataset>/<split>  retrievers=[...]  fusion=<class>`` for a pipeline."""
    fusion = type(pipe.fusion).__name__ if pipe.fusion else None
    return f"{dataset}/{split}  retrievers={list(pipe.retrievers)}  fusion={fusion}"


def run_summary(title: str, metrics: Mapping[str, Any], names: Sequence[str]) -> str:
    """The headline metrics first, marked ``*`` (``rag_lab.metrics.names.HEADLINE``), then the
    other configured metrics, evidence and answer metrics, then the run's counts and costs."""
    head = [k for k in HEADLINE if k in metrics and not _absent(metrics[k])]
    keys = [*head, *(metric_key(n) for n in names)]
    keys += [k for k in metrics if k == "empty_result_rate" or k.startswith("mean_retrieved_at_")]
    keys += [k for k in metrics if k.startswith(("evidence_", "answer/"))]
    keys += list(RUN_SUMMARY)
    note = "  (* = headline)" if head else ""
    parts = [f"\n{title}{note}\n{format_table(metrics, keys, head)}"]
    cats = category_table(metrics)
    if cats:
        parts.append(f"\n{cats}")
    return "\n".join(parts)


def _multirun() -> dict[str, Any] | None:
    """This job's sweep context (``rag_lab.sweep.context``) inside a Hydra multirun, else None."""
    from rag_lab.sweep.context import sweep_context

    try:
        return sweep_context()
    except Exception:  # noqa: BLE001 - a partial Hydra config (the launcher): not a job
        return None


def job_line(
    label: str,
    metrics: Mapping[str, Any],
    overrides: Sequence[str] = (),
    out_dir: Path | str | None = None,
    first: str | None = None,
) -> str:
    """A multirun job in one line: ``[label] overrides  metric=value ...  seconds  folder``;
    ``first`` (the optimised metric's key) leads the headline metrics."""
    keys = [k for k in dict.fromkeys([first, *JOB_METRICS]) if k]
    shown = [f"{k}={_value(k, metrics[k])}" for k in keys if not _absent(metrics.get(k))]
    parts = [f"[{label}]", *overrides, " ".join(shown)]
    if not _absent(metrics.get("total_seconds")):
        parts.append(f"{metrics['total_seconds']:.1f} s")
    if out_dir is not None:
        parts.append(str(out_dir))
    return "  ".join(p for p in parts if p)


def _one_line(cfg: Any) -> dict[str, Any] | None:
    """The sweep context when this run prints one line (a multirun job, ``verbose`` off)."""
    if _verbose(cfg):
        return None
    return _multirun()


def _verbose(cfg: Any) -> bool:
    try:
        return bool(cfg.get("verbose", False))
    except AttributeError:
        return False


def show_run(
    cfg: Any, title: str, metrics: Mapping[str, Any], names: Sequence[str], out_dir: Path
) -> None:
    """Print a finished evaluation on stdout: the full summary (:func:`run_summary`) and the
    output folder; inside a multirun (``verbose`` off) the job's one line instead, with the
    overrides the sweep varies."""
    ctx = _one_line(cfg)
    if ctx is None:
        print(run_summary(title, metrics, names) + f"\n\n  outputs: {out_dir}")
        return
    swept = set(ctx.get("swept") or ())
    overrides = []
    if str(ctx.get("job")) == out_dir.name:  # a job's own folder (not the winner's re-run)
        overrides = [
            o
            for o in ctx.get("overrides", [])
            if not swept or o.partition("=")[0].lstrip("+~") in swept
        ]
    opt = cfg.get("optimized_metric") if hasattr(cfg, "get") else None
    line = job_line(out_dir.name, metrics, overrides, out_dir, metric_key(opt) if opt else None)
    # one write with its newline: parallel jobs (forked workers) finishing at the same moment
    # share the pipe, and print's separate "\n" could land after another job's line
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def show_tracking(cfg: Any, run_id: str, where: str = "", page: str | None = None) -> None:
    """The run's MLflow id (``  mlflow run: <id> (<uri>)``) and, on a server, the link to its
    experiment's runs with the headline columns (``  mlflow runs: <url>``); a multirun job's one
    line has no room for them (the id is in the job folder's ``mlflow_run_id``)."""
    if _one_line(cfg) is None:
        print(f"  mlflow run: {run_id} ({where})")
        if page:
            print(f"  mlflow runs: {page}")


# -- logs ------------------------------------------------------------------------------------


class LibraryFilter(logging.Filter):
    """A console handler's filter: every WARNING and above passes; INFO and DEBUG lines pass only
    from :data:`OWN_LOGGERS` (rag_lab's), unless ``verbose``. The run's log file keeps them all."""

    def __init__(self, verbose: bool = False) -> None:
        super().__init__()
        self.verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        return (
            self.verbose
            or record.levelno >= logging.WARNING
            or record.name.split(".", 1)[0] in OWN_LOGGERS
        )


def console_filter(verbose: Any = False, progress: Any = "auto") -> LibraryFilter:
    """The filter factory of ``conf/hydra/default.yaml``'s logging configs (``()``), so every
    Hydra task of rag_lab sets its console up in one place: ``verbose`` (library INFO lines on
    the console) and ``progress`` (``auto`` | ``true`` | ``false``: ``rag_lab.runtime.progress``). A
    bad value is the usual one-line error (exit 2): Hydra configures logging before the task runs.

    MLflow prints through a handler of its own, set up when it is imported at the level of
    ``$MLFLOW_LOGGING_LEVEL``: without ``verbose`` that defaults to WARNING here (a value the user
    set is kept), and an MLflow imported earlier (a multirun's callback) is turned down too."""
    from rag_lab.errors import ConfigError, fail
    from rag_lab.runtime import progress as progress_bars

    if not isinstance(verbose, bool):
        fail(f"verbose={verbose!r}: must be true or false")
    try:
        progress_bars.configure(progress)
    except ConfigError as exc:
        fail(str(exc))
    if not verbose:
        os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
        if "mlflow" in sys.modules:
            logging.getLogger("mlflow").setLevel(logging.WARNING)
    return LibraryFilter(verbose)


class RunLogFile(logging.FileHandler):
    """The run's ``.log`` file (Hydra's ``job_logging`` file handler, conf/hydra/default.yaml). A
    record that cannot be written for a full disk, an exhausted quota or a read-only folder
    stops the file with one warning line on stderr, instead of ``logging``'s traceback for every
    record after it; the run's own error names the output it could not write."""

    _stopped = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self._stopped:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
            self._stopped = True
            print(
                f"warning: the run log {self.baseFilename} stops here: "
                f"{os.strerror(exc.errno).lower()}",
                file=sys.stderr,
            )
            return
        super().handleError(record)
