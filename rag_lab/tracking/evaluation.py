"""What an evaluate run logs to its tracker: run name, params, tags and artifacts.

A single run logs the whole resolved config as params; a sweep's child logs only the overrides
the sweep varies (the rest is the parent's), and attaches to the sweep's parent run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_lab.outputs import CONFIG_FILE, INGEST_REPORT_FILE, METRICS_FILE, PER_QUERY_FILE


def log_evaluation(
    tracker: Any,
    *,
    resolved: Mapping[str, Any],
    dataset: str,
    split: str,
    fingerprint: str,
    retrievers: Sequence[str],
    metrics: Mapping[str, float],
    warnings: Sequence[str],
    out_dir: Path,
    run_name: str | None = None,
    sweep: Mapping[str, Any] | None = None,
) -> str:
    """Log one evaluate run; returns the tracker's run id."""
    name = run_name or f"{dataset}/{split} {'+'.join(retrievers)}"
    tags = {
        "dataset": dataset,
        "split": split,
        "dataset_fingerprint": fingerprint,
        "retrievers": ",".join(retrievers),
    }
    if warnings:
        tags["data_warnings"] = " | ".join(warnings)[:5000]
    params: Any = resolved
    if sweep:  # a child of the sweep's parent run: params = the overrides the sweep varies
        given = dict(o.split("=", 1) for o in sweep["overrides"] if "=" in o)
        params = {k: v for k, v in given.items() if k.lstrip("+~") in sweep.get("swept", given)}
        tags["overrides"] = " ".join(sweep["overrides"])[:5000]
        name = run_name or f"trial {sweep['job']}: " + " ".join(sweep["overrides"])[:200]
    artifacts = {
        "": out_dir / CONFIG_FILE,
        "tables": out_dir / PER_QUERY_FILE,
        "metrics": out_dir / METRICS_FILE,
    }
    if (out_dir / INGEST_REPORT_FILE).is_file():
        artifacts["ingest"] = out_dir / INGEST_REPORT_FILE
    return str(
        tracker.log_run(
            name,
            params,
            metrics,
            tags,
            artifacts,
            parent_run_id=sweep.get("run_id") if sweep else None,
        )
    )
