"""What one ``rag-lab evaluate -m`` invocation costs beyond its stage work (issue 36, item 5).

    python benchmarks/bench_fixed_cost.py --repeats 3 --out benchmarks/results/fixed_cost.json
    python benchmarks/bench_fixed_cost.py --baseline /tmp/rag_lab_base   # the same against
        # another source tree (``git archive <commit> | tar -x -C /tmp/rag_lab_base``)

On the shipped sample (dev split, ``embedder=hashing``, BM25 + dense, RRF, ``tracking=none``,
``progress=false``), each through the real CLI in a fresh process, CPU = user + system of the
whole process tree (the forked workers included), measured in one run after a cold run that
fills the stage cache and one run of each command (its report's plots cached: not timed):

1. the warm 3-job multirun ``fusion.k=10,30,60`` with ``sweep.report_winner=false``, and with
   the default winner report (the winner evaluated again on the test split);
2. per extra invocation: the warm 6-job multirun ``fusion.k=10,20,30,40,50,60`` as one
   invocation and as two of three jobs each; the difference is what splitting costs.

With ``--baseline DIR`` every measurement also runs on that source tree (``PYTHONPATH=DIR``), the
two interleaved repeat by repeat, and the ratios baseline / this tree are printed. Medians over
``--repeats``; the load average is recorded: on a shared machine compare CPU seconds and ratios
measured in one run, not seconds across runs. Target (issue 36): the warm 3-job multirun
<= 1.5 CPU-s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
BASE = [
    "dataset=sample",
    "dataset.split=dev",
    "embedder=hashing",
    "tracking=none",
    "progress=false",
]
THREE = "fusion.k=10,30,60"
SIX = ["fusion.k=10,20,30,40,50,60"]
SIX_SPLIT = [["fusion.k=10,20,30"], ["fusion.k=40,50,60"]]
TARGET_CPU_S = 1.5


def timed(tree: Path, args: list[str]) -> dict[str, float]:
    """``rag-lab evaluate -m <args>`` with ``tree``'s code: wall and CPU seconds (user + system,
    children included: ``wait4``)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "rag_lab.cli", "evaluate", "-m", *args]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            log.seek(0)
            sys.exit(f"failed: {' '.join(cmd)}\n{log.read().decode(errors='replace')[-4000:]}")
    return {"wall_s": round(wall, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline", type=Path, default=None, help="another source tree to compare")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: temporary)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    work = (args.work or Path(tempfile.mkdtemp(prefix="rag_lab_bench_fixed_"))).resolve()
    trees = {"this": HERE}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()

    def common(tag: str, name: str) -> list[str]:
        # each tree its own cache (same stage entries), each command its own sweep folder
        return [
            f"paths.experiments={work / tag / 'exp'}",
            f"hydra.sweep.dir={work / tag / name}",
        ]

    cases: dict[str, list[list[str]]] = {
        "three_jobs_no_winner": [[THREE, "sweep.report_winner=false"]],
        "three_jobs": [[THREE]],
        "six_jobs_one_invocation": [[*SIX, "sweep.report_winner=false"]],
        "six_jobs_two_invocations": [[*s, "sweep.report_winner=false"] for s in SIX_SPLIT],
    }
    res: dict = {
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "command": "rag-lab evaluate -m " + " ".join([*BASE, THREE]),
    }
    for tag, tree in trees.items():  # cold: fills each tree's stage cache (not timed)
        shutil.rmtree(work / tag, ignore_errors=True)
        timed(tree, [*BASE, *SIX, "sweep.report_winner=true", *common(tag, "cold")])
        for case, invocations in cases.items():  # each command once: its plots cached too
            for i, inv in enumerate(invocations):
                timed(tree, [*BASE, *inv, *common(tag, f"{case}_warmup_{i}")])
    samples: dict[str, dict[str, list[dict[str, float]]]] = {
        t: {c: [] for c in cases} for t in trees
    }
    for rep in range(args.repeats):
        for case, invocations in cases.items():
            for tag, tree in trees.items():  # interleaved: this tree, then the baseline
                parts = [
                    timed(tree, [*BASE, *inv, *common(tag, f"{case}_{rep}_{i}")])
                    for i, inv in enumerate(invocations)
                ]
                total = {k: round(sum(p[k] for p in parts), 3) for k in ("wall_s", "cpu_s")}
                samples[tag][case].append(total)
                print(f"repeat {rep + 1} {tag:<8} {case:<26} {total}", file=sys.stderr)
    res["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    for tag in trees:
        out: dict = {}
        for case in cases:
            for unit in ("wall_s", "cpu_s"):
                out[f"{case}_{unit}"] = round(
                    statistics.median(s[unit] for s in samples[tag][case]), 3
                )
        for unit in ("wall_s", "cpu_s"):
            out[f"extra_invocation_{unit}"] = round(
                out[f"six_jobs_two_invocations_{unit}"] - out[f"six_jobs_one_invocation_{unit}"], 3
            )
        out["samples"] = samples[tag]
        res[tag] = out
    if "baseline" in res:
        res["ratio_baseline_over_this"] = {
            key: round(res["baseline"][key] / res["this"][key], 2)
            for key in res["this"]
            if key.endswith("_s") and res["this"][key] > 0
        }
    res["target_three_jobs_cpu_s"] = TARGET_CPU_S
    for tag in trees:
        r = res[tag]
        print(
            f"{tag}: warm 3-job multirun {r['three_jobs_no_winner_cpu_s']:.2f} CPU-s "
            f"({r['three_jobs_no_winner_wall_s']:.2f} s wall; with the winner report "
            f"{r['three_jobs_cpu_s']:.2f} CPU-s), an extra invocation "
            f"{r['extra_invocation_cpu_s']:.2f} CPU-s  [target <= {TARGET_CPU_S} CPU-s]"
        )
    if "ratio_baseline_over_this" in res:
        print("baseline / this:", json.dumps(res["ratio_baseline_over_this"]))
    print(f"load average {res['load_average_before']} -> {res['load_average_after']}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
