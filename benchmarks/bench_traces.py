"""What a trace per query costs a warm ``rag-lab evaluate`` (issue 31): the sample with
``tracking.traces=none`` against ``tracking.traces=all``, interleaved in one process after a
warm-up run (stage cache filled, imports done), each run logging to the same sqlite MLflow store.

    python benchmarks/bench_traces.py --repeats 3 --out benchmarks/results/traces.json

Prints and writes the median wall time and process CPU time of each setting, their ratios, and
the trace writing's own seconds (the run's ``trace_seconds`` tag: wall, from the start of the
writes, which run in a background thread beside the job's other work, to their end) and CPU
seconds (``trace_cpu_seconds``: the writing thread's)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from omegaconf import open_dict

from rag_lab.evaluate import evaluate
from rag_lab.paths import CONFIG_DIR

BASE = ["dataset=sample", "embedder=hashing", "evaluation.html_report=false"]


def one(root: Path, n: int, traces: str) -> tuple[float, float, float, float]:
    """Wall and CPU seconds of one evaluate run and its trace_seconds and trace_cpu_seconds tags
    (0 without traces)."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("evaluate", overrides=[*BASE, f"tracking.traces={traces}"])
    with open_dict(cfg):
        cfg.paths.output_dir = str(root / f"run_{n}_{traces}")
        cfg.paths.experiments = str(root / "experiments")
        cfg.cache.dir = str(root / "cache")
    t0, c0 = time.perf_counter(), time.process_time()
    evaluate(cfg)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    run_id = (Path(cfg.paths.output_dir) / "mlflow_run_id").read_text()
    tags = MlflowClient(cfg.tracking.uri).get_run(run_id).data.tags
    writing = float(tags.get("trace_seconds", 0.0)), float(tags.get("trace_cpu_seconds", 0.0))
    return wall, cpu, *writing


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_traces_"))
    one(root, 0, "none")  # warm-up: caches, imports, the store's tables
    walls: dict[str, list[float]] = {"none": [], "all": []}
    cpus: dict[str, list[float]] = {"none": [], "all": []}
    writing: list[float] = []
    writing_cpu: list[float] = []
    load = [round(x, 2) for x in os.getloadavg()]
    for n in range(1, args.repeats + 1):
        for setting in ("none", "all"):
            wall, cpu, spent, spent_cpu = one(root, n, setting)
            walls[setting].append(round(wall, 3))
            cpus[setting].append(round(cpu, 3))
            if setting == "all":
                writing.append(spent)
                writing_cpu.append(spent_cpu)
            print(f"repeat {n} traces={setting}: {wall:.2f} s (cpu {cpu:.2f} s)", file=sys.stderr)
    none, full = statistics.median(walls["none"]), statistics.median(walls["all"])
    cpu_none, cpu_all = statistics.median(cpus["none"]), statistics.median(cpus["all"])
    result = {
        "repeats": args.repeats,
        "load_average_before": load,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "walls_none_s": walls["none"],
        "walls_all_s": walls["all"],
        "cpu_none_s": cpus["none"],
        "cpu_all_s": cpus["all"],
        "median_none_s": round(none, 3),
        "median_all_s": round(full, 3),
        "ratio": round(full / none, 3),
        "cpu_ratio": round(cpu_all / cpu_none, 3),
        "trace_seconds_median": round(statistics.median(writing), 3),
        "trace_cpu_seconds_median": round(statistics.median(writing_cpu), 3),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
