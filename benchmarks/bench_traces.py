"""What a trace per query costs a warm ``rag-lab evaluate`` (issue 31): the sample with
``tracking.traces=none`` against ``tracking.traces=all``.

The figure in the docs (``--cli``): the README's warm job exactly as a user types it, each run its
own process, ``rag-lab evaluate paths.experiments=<warm> evaluation.latency_queries=0
tracking.traces=none|all`` (default e5 embedder; ``<warm>`` a folder prepared by two runs first:
stage cache, MLflow store and its tables), the two settings interleaved for ``--rounds`` rounds
(the order alternating per round, so a drift in the machine's load falls on both), wall and CPU
seconds (user + sys of the process, as ``/usr/bin/time``) per run, the per-round ratios
``all / none`` and their median and range, with the load average, MLflow's version and the
commit in the JSON written:

    python benchmarks/bench_traces.py --cli --rounds 7 --out benchmarks/results/traces_cli.json

An A/B of two versions of rag_lab (``--tree NAME=<folder or revision>``, repeated; a revision is
exported with ``git archive``): each round runs both, the trees' order alternating too, and the
JSON has the figures per tree:

    python benchmarks/bench_traces.py --cli --rounds 7 --tree before=7e6aed9 --tree now=HEAD \
        --out benchmarks/results/traces_cli_ab.json

In-process (the default): the same settings through ``rag_lab.evaluate.evaluate`` in one process
after a warm-up run (imports done), the hashing embedder, each run logging to the same store:

    python benchmarks/bench_traces.py --repeats 3 --out benchmarks/results/traces.json

In-process, it prints and writes the median wall time and process CPU time of each setting, their
ratios, and the trace writing's own seconds (the run's ``trace_seconds`` tag: wall, from the
start of the writes, which run in a background thread beside the job's other work, to their end)
and CPU seconds (``trace_cpu_seconds``: the writing thread's; in the ``--cli`` JSON too)."""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

BASE = ["dataset=sample", "embedder=hashing", "evaluation.html_report=false"]
CLI = ["evaluate", "evaluation.latency_queries=0"]  # + paths.experiments=<warm>, tracking.traces
SETTINGS = ("none", "all")


def one(root: Path, n: int, traces: str) -> tuple[float, float, float, float]:
    """Wall and CPU seconds of one evaluate run and its trace_seconds and trace_cpu_seconds tags
    (0 without traces)."""
    from hydra import compose, initialize_config_dir
    from mlflow.tracking import MlflowClient
    from omegaconf import open_dict

    from rag_lab.evaluate import evaluate
    from rag_lab.paths import CONFIG_DIR

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


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


REPO = Path(__file__).resolve().parent.parent


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def _commit(tree: Path) -> str:
    """``tree``'s HEAD (short hash), ``+changes`` with uncommitted changes to tracked files; a
    tree :func:`_tree` exported: its ``COMMIT`` file."""
    if (tree / "COMMIT").is_file():
        return (tree / "COMMIT").read_text().strip()
    head = _git(tree, "rev-parse", "--short", "HEAD") or "unknown"
    return head + (
        "+changes" if _git(tree, "status", "--porcelain", "--untracked-files=no") else ""
    )


def _tree(spec: str, root: Path) -> Path:
    """A ``--tree`` value: a folder holding a rag_lab checkout, else a revision of this
    repository (``HEAD``, ``7e6aed9``, a branch), exported under ``root`` with its hash."""
    if Path(spec).is_dir():
        return Path(spec).resolve()
    rev = _git(REPO, "rev-parse", "--short", spec)
    if not rev:
        sys.exit(f"--tree {spec}: neither a folder nor a revision of {REPO}")
    out = root / "trees" / rev
    if not out.is_dir():
        out.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
        (out / "COMMIT").write_text(rev + "\n")
    return out


def _run_tags(warm: Path, run_id: str) -> dict[str, str]:
    """The run's trace tags, read from the sqlite store (no MLflow import here)."""
    keys = ("traces", "trace_seconds", "trace_cpu_seconds", "traces_error")
    with sqlite3.connect(warm / "mlflow.db") as db:
        rows = db.execute(
            f"select key, value from tags where run_uuid = ? and key in ({','.join('?' * 4)})",
            (run_id, *keys),
        ).fetchall()
    return dict(rows)


def cli_run(warm: Path, setting: str, extra: list[str], log: Path, tree: Path) -> dict:
    """One ``rag-lab evaluate`` process on the warm folder with rag_lab from ``tree`` (its working
    directory, first on ``sys.path`` with ``python -m``, and first on ``PYTHONPATH``): wall and CPU
    seconds, load, the run's trace tags."""
    cmd = [sys.executable, "-m", "rag_lab.cli", *CLI, f"paths.experiments={warm}", *extra]
    cmd.append(f"tracking.traces={setting}")
    path = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    load = os.getloadavg()[0]
    before = set((warm / "runs").glob("*/mlflow_run_id"))
    cpu0, t0 = _children_cpu(), time.perf_counter()
    with log.open("w") as fh:
        done = subprocess.run(
            cmd, cwd=tree, env=env, stdout=fh, stderr=subprocess.STDOUT, check=False
        )
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if done.returncode != 0:
        sys.exit(f"rag-lab evaluate tracking.traces={setting} failed; see {log}")
    new = sorted(set((warm / "runs").glob("*/mlflow_run_id")) - before)
    tags = _run_tags(warm, new[-1].read_text().strip()) if new else {}
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "tags": tags,
    }


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def _summary(runs: list[dict]) -> dict:
    """One tree's rounds: medians, the per-round ratios ``all / none - 1`` (wall, CPU), the
    writing thread's CPU."""
    return {
        "median_none_wall_s": round(statistics.median(r["none"]["wall_s"] for r in runs), 3),
        "median_all_wall_s": round(statistics.median(r["all"]["wall_s"] for r in runs), 3),
        "median_none_cpu_s": round(statistics.median(r["none"]["cpu_s"] for r in runs), 3),
        "median_all_cpu_s": round(statistics.median(r["all"]["cpu_s"] for r in runs), 3),
        "wall_added": _spread([r["all"]["wall_s"] / r["none"]["wall_s"] - 1 for r in runs]),
        "cpu_added": _spread([r["all"]["cpu_s"] / r["none"]["cpu_s"] - 1 for r in runs]),
        "trace_cpu_seconds": _spread(
            [float(r["all"]["tags"].get("trace_cpu_seconds", "nan")) for r in runs]
        ),
    }


def cli_main(
    rounds: int, extra: list[str], work: Path | None, out: Path | None, trees: dict[str, Path]
) -> None:
    """``--cli``: the module docstring's first command, for each of ``trees`` (rag_lab source
    trees by name; A/B: their runs interleaved in each round, the trees' order alternating)."""
    root = work or Path(tempfile.mkdtemp(prefix="bench_traces_cli_"))
    warm, logs = root / "warm", root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    names = list(trees)
    # cold (stage cache, store) with the first tree, then each warm once (imports, page cache)
    for i, name in enumerate([names[0], *names]):
        prep = cli_run(warm, "none", extra, logs / f"prepare_{i}_{name}.log", trees[name])
        print(
            f"prepare {name}: {prep['wall_s']:.2f} s (cpu {prep['cpu_s']:.2f} s)", file=sys.stderr
        )
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for n in range(1, rounds + 1):
        for name in names if n % 2 else names[::-1]:
            order = SETTINGS if n % 2 else SETTINGS[::-1]
            got = {}
            for setting in order:
                log = logs / f"round_{n}_{name}_{setting}.log"
                got[setting] = r = cli_run(warm, setting, extra, log, trees[name])
                print(
                    f"round {n} {name} traces={setting}: {r['wall_s']:.2f} s (cpu "
                    f"{r['cpu_s']:.2f} s, load {r['load_before']:.2f}) "
                    f"{r['tags'].get('trace_cpu_seconds', '')}",
                    file=sys.stderr,
                )
            runs[name].append({"round": n, "order": list(order), **got})
    loads = [r[s]["load_before"] for rs in runs.values() for r in rs for s in SETTINGS]
    result = {
        "command": "rag-lab "
        + " ".join([*CLI, "paths.experiments=<warm>", *extra])
        + " tracking.traces=none|all",
        "rounds": rounds,
        "mlflow": version("mlflow"),
        "commit": {name: _commit(tree) for name, tree in trees.items()},
        "cpu_count": os.cpu_count(),
        "load_1min": _spread(loads),
        **({"results": {name: _summary(rs) for name, rs in runs.items()}}),
        "runs": runs,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cli", action="store_true", help="the README's warm job, a process a run")
    ap.add_argument("--rounds", type=int, default=7, help="--cli: interleaved none/all rounds")
    ap.add_argument("--extra", action="append", default=[], help="--cli: an override for each run")
    ap.add_argument("--work", type=Path, default=None, help="--cli: the folder (default: a temp)")
    ap.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="--cli: rag_lab to measure, a folder or a revision of this repository (exported "
        "with git archive); repeat for an A/B (default: this checkout)",
    )
    ap.add_argument("--repeats", type=int, default=3, help="in-process repeats")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.cli:
        work = args.work or Path(tempfile.mkdtemp(prefix="bench_traces_cli_"))
        trees = dict(t.split("=", 1) for t in args.tree) or {"this": str(REPO)}
        paths = {name: _tree(spec, work) for name, spec in trees.items()}
        cli_main(args.rounds, args.extra, work, args.out, paths)
        return
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
