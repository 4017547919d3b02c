"""What an edit costs end to end: `rag-lab evaluate` on SciFact, cold, warm, after one edited
document, and after one added query, each a process of its own on one stage cache.

    python benchmarks/bench_edit.py --data ../shared/data --out benchmarks/results/edit.json

Phases, measured in one run (issue 36, item 4; default ``retrievers=[bm25,dense]
embedder=hashing fusion=rrf``, BEIR's whole documents):
1. cold: an empty cache;
2. warm: the same again;
3. edit: one abstract edited (a sentence prepended);
   (``--repeat N``: 1-3 N times, each on a new cache with another abstract edited: medians)
4. scratch: the edited corpus on an empty cache (its metrics must equal the edit's, to 4 decimals);
5. query: one query added to the test split (each retriever must search that query only).

Each phase's cost is read two ways: the stage work (``parse + chunk + index + query transform +
retrieve + fuse`` seconds of its ``metrics.json``) and the process' CPU seconds (user + system:
a loaded machine stretches wall-clock stage times, not CPU). Prints each, the ratios the issue
sets (warm / cold; edit above warm / cold above warm) and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGES = (
    "parse_seconds",
    "chunk_seconds",
    "index_seconds",
    "query_transform_seconds",
    "retrieve_seconds",
    "fuse_seconds",
)
COUNTERS = (
    "cache/corpus/n_parsed_files",
    "cache/corpus/n_parsed_documents",
    "cache/corpus/n_checked_documents",
    "cache/corpus/n_tagged_chunks",
    "bm25/updated_chunks",
    "dense/updated_chunks",
    "dense/embedded_chunks",
    "cache/bm25/n_searched",
    "cache/bm25/n_carried",
    "cache/dense/n_searched",
    "cache/dense/n_carried",
)
HEADLINE = ("ndcg_at_10", "recall_at_100", "mrr_at_10", "map_at_100", "hit_rate_at_5")


def evaluate(overrides: list[str], run_dir: Path) -> dict:
    """One `rag-lab evaluate` process: its metrics, wall and CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "rag_lab.cli", "evaluate", *overrides]
    cmd += [f"hydra.run.dir={run_dir}", "tracking=none", "progress=false"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return {
        "wall_seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "stage_seconds": round(sum(float(metrics.get(k, 0.0)) for k in STAGES), 4),
        **{k: round(float(metrics.get(k, 0.0)), 4) for k in STAGES},
        **{k: metrics[k] for k in COUNTERS if k in metrics},
        "metrics": {k: round(float(metrics[k]), 4) for k in HEADLINE if k in metrics},
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", default=os.environ.get("RAG_LAB_DATA", "../shared/data"))
    ap.add_argument("--retrievers", default="[bm25,dense]")
    ap.add_argument("--embedder", default="hashing")
    ap.add_argument("--fusion", default="rrf")
    ap.add_argument("--line", type=int, default=100, help="corpus line of the edited document")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="cold, warm and edit this many times (each on a new cache, another line edited); "
        "the ratios are the medians",
    )
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="rag_lab_bench_edit_"))
    data = work / "scifact"
    for p in (data, work / "scratch_cache"):
        shutil.rmtree(p, ignore_errors=True)
    shutil.copytree(Path(args.data) / "scifact", data)
    os.chmod(data, 0o755)
    for p in data.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)

    def overrides(cache: Path) -> list[str]:
        return [
            "dataset=beir",
            f"dataset.path={data}",
            f"retrievers={args.retrievers}",
            f"embedder={args.embedder}",
            f"fusion={args.fusion}",
            f"cache.dir={cache}",
        ]

    res: dict = {
        "command": " ".join(sys.argv),
        "overrides": overrides(Path("<cache>")),
        "load_before": list(os.getloadavg()),
        "cpus": os.cpu_count(),
        "phases": {},
    }
    phases = res["phases"]

    def phase(name: str, cache: Path) -> dict:
        phases[name] = evaluate(overrides(cache), work / f"run_{name}")
        p = phases[name]
        extra = {
            k.split("/")[-1] if k.startswith("cache/corpus/") else k: p[k]
            for k in COUNTERS
            if k in p
        }
        print(
            f"{name:8s} stage work {p['stage_seconds']:7.3f} s   CPU {p['cpu_seconds']:6.2f} s   "
            f"wall {p['wall_seconds']:6.2f} s   {p['metrics']}\n          {extra}",
            flush=True,
        )
        return p

    corpus = data / "corpus.jsonl"
    pristine = corpus.read_text(encoding="utf-8")
    rounds = []
    for i in range(args.repeat):
        suffix = "" if i == 0 else f"_{i}"
        cache = work / f"cache{suffix}"
        shutil.rmtree(cache, ignore_errors=True)
        corpus.write_text(pristine, encoding="utf-8")
        cold = phase(f"cold{suffix}", cache)
        warm = phase(f"warm{suffix}", cache)
        lines = pristine.splitlines()
        line = args.line + 97 * i
        rec = json.loads(lines[line])
        rec["text"] = "Editorial note: this abstract was revised. " + rec["text"]
        lines[line] = json.dumps(rec, ensure_ascii=False)
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
        res.setdefault("edited_documents", []).append(rec["_id"])
        edit = phase(f"edit{suffix}", cache)
        rounds.append((cold, warm, edit, cache))
    phase("scratch", work / "scratch_cache")
    # one more query: a train query joins the test split
    test = (data / "qrels" / "test.tsv").read_text().splitlines()
    in_test = {row.split("\t")[0] for row in test[1:]}
    train = (data / "qrels" / "train.tsv").read_text().splitlines()[1:]
    added = next(row for row in train if row.split("\t")[0] not in in_test)
    (data / "qrels" / "test.tsv").write_text("\n".join([*test, added]) + "\n")
    res["added_query"] = added.split("\t")[0]
    phase("query", rounds[-1][3])
    res["load_after"] = list(os.getloadavg())

    ratios = {}
    for what in ("stage_seconds", "cpu_seconds"):
        warm_cold = [w[what] / c[what] for c, w, _, _ in rounds]
        edit_cold = [(e[what] - w[what]) / (c[what] - w[what]) for c, w, e, _ in rounds]
        ratios[what] = {
            "warm_over_cold": round(statistics.median(warm_cold), 4),
            "edit_above_warm_over_cold_above_warm": round(statistics.median(edit_cold), 4),
            "each_round": [[round(a, 4), round(b, 4)] for a, b in zip(warm_cold, edit_cold)],
        }
    res["ratios"] = ratios
    edit = rounds[-1][2]
    res["edit_metrics_equal_scratch"] = edit["metrics"] == phases["scratch"]["metrics"]
    searched = [phases["query"].get(f"cache/{r}/n_searched") for r in ("bm25", "dense")]
    res["added_query_searched"] = searched
    print(
        f"stage work: warm / cold = {ratios['stage_seconds']['warm_over_cold']:.3f}, "
        f"(edit - warm) / (cold - warm) = "
        f"{ratios['stage_seconds']['edit_above_warm_over_cold_above_warm']:.3f}\n"
        f"CPU:        warm / cold = {ratios['cpu_seconds']['warm_over_cold']:.3f}, "
        f"(edit - warm) / (cold - warm) = "
        f"{ratios['cpu_seconds']['edit_above_warm_over_cold_above_warm']:.3f}\n"
        f"edit metrics == scratch metrics (4 decimals): {res['edit_metrics_equal_scratch']}; "
        f"added query: searched {searched} (bm25, dense); "
        f"load {res['load_before'][0]:.1f} -> {res['load_after'][0]:.1f} on {res['cpus']} CPUs",
        flush=True,
    )
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    main()
