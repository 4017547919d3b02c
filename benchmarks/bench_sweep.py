"""Sweep cost benchmark on SciFact: a sweep must cost what its distinct stages cost.

    python benchmarks/bench_sweep.py --data ../shared/data --out benchmarks/results/sweep.json

Measured in one run, each phase with a fresh or warm stage cache as stated, through the real CLI:
1. cold single configuration: MiniLM dense + BM25, RRF, on the train split (selection split),
   empty cache;
2. cold 12-configuration sweep (empty cache): fusion method x weights x RRF k, as two multiruns
   (RRF: k in {10, 60} x dense weight in {0.5, 1, 2}; weighted: normalisation in {minmax, zscore}
   x dense weight in {0.5, 1, 2}); each also re-evaluates its winner on the test split;
3. the same sweep again (warm cache).
Targets: (2) <= 1.5 x (1); (2) / (3) >= 10.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from peak import peak_rss_mib  # benchmarks/peak.py (scripts run from benchmarks/)

BASE = ["experiment=scifact_hybrid", "dataset.split=train"]
SWEEPS = [
    ["fusion=rrf", "fusion.k=10,60", "+fusion.weights.dense=0.5,1.0,2.0"],
    ["fusion=weighted", "fusion.normalization=minmax,zscore", "fusion.weights.dense=0.5,1.0,2.0"],
]


def cli(args: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "rag_lab.cli", "evaluate", *args],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.exit(f"failed: rag-lab evaluate {' '.join(args)}\n{proc.stderr[-4000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", default=os.environ.get("RAG_LAB_DATA", "../shared/data"))
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="rag_lab_bench_sweep_"))
    env = {**os.environ, "RAG_LAB_DATA": str(Path(args.data).resolve()), "HF_HUB_OFFLINE": "1"}

    def common(name: str, exp: str) -> list[str]:
        return [
            f"paths.experiments={work / exp}",
            f"hydra.run.dir={work / name}",
            f"hydra.sweep.dir={work / name}",
        ]

    res: dict = {}
    shutil.rmtree(work / "single_exp", ignore_errors=True)
    res["cold_single_seconds"] = cli([*BASE, *common("single", "single_exp")], env)
    print(f"cold single configuration: {res['cold_single_seconds']:.1f} s", flush=True)
    shutil.rmtree(work / "sweep_exp", ignore_errors=True)
    cold = [
        cli(["-m", *BASE, *s, *common(f"sweep_cold_{i}", "sweep_exp")], env)
        for i, s in enumerate(SWEEPS)
    ]
    res["cold_sweep_seconds"] = sum(cold)
    cold_parts = " + ".join(f"{c:.1f}" for c in cold)
    print(f"cold 12-configuration sweep: {res['cold_sweep_seconds']:.1f} s ({cold_parts})")
    warm = [
        cli(["-m", *BASE, *s, *common(f"sweep_warm_{i}", "sweep_exp")], env)
        for i, s in enumerate(SWEEPS)
    ]
    res["warm_sweep_seconds"] = sum(warm)
    warm_parts = " + ".join(f"{c:.1f}" for c in warm)
    print(f"warm rerun of the sweep:     {res['warm_sweep_seconds']:.1f} s ({warm_parts})")
    res["cold_sweep_over_single"] = res["cold_sweep_seconds"] / res["cold_single_seconds"]
    res["cold_over_warm_sweep"] = res["cold_sweep_seconds"] / res["warm_sweep_seconds"]
    n_jobs = sum(1 for p in work.glob("sweep_cold_*/*/metrics.json"))
    res["n_configurations"] = n_jobs
    print(f"ratio cold sweep / cold single: {res['cold_sweep_over_single']:.2f} (target <= 1.5)")
    print(f"ratio cold sweep / warm sweep:  {res['cold_over_warm_sweep']:.1f} (target >= 10)")
    for i in range(len(SWEEPS)):
        print((work / f"sweep_cold_{i}" / "report" / "leaderboard.md").read_text())
    res["peak_rss_mib"] = peak_rss_mib()
    print(f"peak RSS {res['peak_rss_mib']}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
