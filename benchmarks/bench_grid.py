"""The competitor's grid on SciFact: context-grid 0.9.5 against rag_lab, cold and warm.

    python benchmarks/bench_grid.py --data ../shared/data --out benchmarks/results/grid.json

The grid (12 configurations): whole documents and 256 / 128 / 64-token windows with an overlap
of N/8, x BM25 / a model-free dense embedder / their RRF fusion, on the SciFact test split (300
queries, 5,183 abstracts). Measured in one run, one phase after the other:

1. context-grid 0.9.5, installed from PyPI into its own venv (``<work>/context_grid/venv``,
   ``python -m venv``; reused when it already holds that version), run as its docs say:
   ``contextgrid run grid.yaml`` with ``mode: factorial``, its ``text`` parser, ``recursive:N``
   chunker (its default overlap is N/8; ``recursive:4096`` is one chunk per document, as every
   abstract has fewer tokens), its own TF-IDF dense embedder, ``bm25`` / ``dense`` / ``hybrid``
   (RRF) indexes and ``cache: disk``. Its BEIR import carries document-level gold that its
   span scorer cannot resolve (it scores nothing), so the corpus is written as a folder of text
   files (title, blank line, abstract) and each judged document is a gold span over its whole
   file. Cold: its cache folder removed first; warm: the same command again.
2. rag_lab, the same grid as one Hydra multirun (its default launcher: forked workers, one per
   CPU) with ``embedder=hashing`` (and the BEIR
   dataset's English analysis): ``chunker=none`` and ``fixed_size`` token windows
   (``unit=tokens``, ``overlap=N/8``; three option files written under ``<work>/rag_lab/conf``
   and put on Hydra's search path) x ``retrievers=[bm25],[dense],[dense,bm25]`` with
   ``fusion=rrf``, ``tracking=none``. Cold: an empty ``cache.dir``; warm: the same command again.

Prints each phase's wall and CPU seconds and peak RSS, the ratios competitor / rag_lab (cold and
warm), and per configuration nDCG@10 and the number of queries each tool scored (context-grid
drops a query whose gold span no single chunk covers to its 0.5 threshold). Timings are only
comparable on an otherwise idle machine: run it under ``flock`` when others share the cores.
``--only rag_lab`` (or ``context-grid``) times one side and takes the other's numbers from
``--out``'s previous file, if any, for the ratios.
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

COMPETITOR = "context-grid==0.9.5"
SIZES = (256, 128, 64)
WHOLE = 4096  # tokens: longer than any SciFact abstract (at most 1,777 of its regex tokens)
TARGETS = {"cold_seconds": 40.0, "warm_seconds": 8.0, "cold_ratio": 10.0, "warm_ratio": 45.0}

GRID_YAML = """\
# context-grid 0.9.5: the 12-configuration SciFact grid (written by benchmarks/bench_grid.py)
name: scifact-grid
corpus: ./corpus
evalset: ./evalset.jsonl
grid:
  parser: text
  chunker: [{chunkers}]
  embedder: tfidf
  index: [bm25, dense, hybrid]
run:
  mode: factorial
  k: 10
  headline: ndcg@10
  cache: disk
report:
  out: ./results
  formats: [json]
"""


def timed(cmd: list[str], cwd: Path | None = None, env: dict | None = None) -> dict:
    """Run ``cmd``; its wall seconds, CPU seconds (user + system, its children included) and
    peak RSS in MiB (the largest of the process and its waited-for children)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            log.seek(0)
            tail = log.read().decode(errors="replace")[-4000:]
            sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")
    return {
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
    }


def read_beir(data: Path) -> tuple[dict[str, str], dict[str, str], dict[str, list[str]]]:
    docs: dict[str, str] = {}
    with open(data / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            docs[str(rec["_id"])] = f"{rec.get('title') or ''}\n\n{rec['text']}"
    queries: dict[str, str] = {}
    with open(data / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            queries[str(rec["_id"])] = rec["text"]
    gold: dict[str, list[str]] = {}
    with open(data / "qrels" / "test.tsv", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            qid, did, score = line.rstrip("\n").split("\t")[:3]
            if i == 0 and qid == "query-id":
                continue
            if float(score) > 0:
                gold.setdefault(qid, []).append(did)
    return docs, queries, gold


def prepare_competitor(data: Path, root: Path) -> None:
    """The corpus as text files, whole-document gold spans, the grid config."""
    docs, queries, gold = read_beir(data)
    corpus = root / "corpus"
    if corpus.is_dir() and len(list(corpus.iterdir())) == len(docs):
        pass  # written by an earlier run (same bytes)
    else:
        shutil.rmtree(corpus, ignore_errors=True)
        corpus.mkdir(parents=True)
        for did, text in docs.items():
            (corpus / f"{did}.txt").write_text(text, encoding="utf-8", newline="\n")
    with open(root / "evalset.jsonl", "w", encoding="utf-8") as fh:
        for qid, dids in gold.items():
            spans = [
                {"doc_id": f"{d}.txt", "start": 0, "end": len(docs[d]), "grade": 1} for d in dids
            ]
            fh.write(json.dumps({"id": qid, "question": queries[qid], "gold": spans}) + "\n")
    chunkers = ", ".join(f"recursive:{n}" for n in (WHOLE, *SIZES))
    (root / "grid.yaml").write_text(GRID_YAML.format(chunkers=chunkers), encoding="utf-8")


def competitor_venv(root: Path) -> Path:
    """``<root>/venv/bin/contextgrid``, installing context-grid 0.9.5 from PyPI if needed."""
    venv = root / "venv"
    exe = venv / "bin" / "contextgrid"
    probe = [str(venv / "bin" / "python"), "-c", "import importlib.metadata as m;"]
    probe[-1] += "print(m.version('context-grid'))"
    if exe.exists():
        got = subprocess.run(probe, capture_output=True, text=True)
        if got.stdout.strip() == COMPETITOR.split("==")[1]:
            return exe
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", COMPETITOR]
    subprocess.run(pip, check=True)
    return exe


def run_competitor(data: Path, work: Path) -> dict:
    load_before = list(os.getloadavg())
    root = work / "context_grid"
    root.mkdir(parents=True, exist_ok=True)
    prepare_competitor(data, root)
    exe = competitor_venv(root)
    cmd = [str(exe), "run", "grid.yaml"]
    out: dict = {"version": COMPETITOR, "command": f"cd {root} && contextgrid run grid.yaml"}
    shutil.rmtree(root / "results", ignore_errors=True)  # its disk cache lives in there
    out["cold"] = timed(cmd, cwd=root)
    print(f"context-grid cold: {out['cold']}", flush=True)
    out["warm"] = timed(cmd, cwd=root)
    print(f"context-grid warm: {out['warm']}", flush=True)
    res = json.loads((root / "results" / "results.json").read_text())
    out["configurations"] = {
        r["label"]: {
            "ndcg@10": round(r["metrics"]["ndcg@10"], 4),
            "recall@10": round(r["metrics"]["recall@10"], 4),
            "scored_queries": r["scored_queries"],
        }
        for r in res["runs"]
    }
    out["load_average_before"], out["load_average_after"] = load_before, list(os.getloadavg())
    return out


def rag_lab_command(data: Path, work: Path) -> list[str]:
    conf = work / "rag_lab" / "conf" / "chunker"
    conf.mkdir(parents=True, exist_ok=True)
    for n in SIZES:
        (conf / f"tokens{n}.yaml").write_text(
            f"# {n}-token windows, overlap {n // 8} (N/8, as context-grid's recursive:{n})\n"
            f"_target_: rag_lab.chunker.FixedSizeChunker\nsize: {n}\noverlap: {n // 8}\n"
            "unit: tokens\n"
        )
    chunkers = ",".join(["none", *(f"tokens{n}" for n in SIZES)])
    return [
        "-m",
        "dataset=beir",
        f"dataset.path={data}",
        f"hydra.searchpath=[file://{work / 'rag_lab' / 'conf'}]",
        f"chunker={chunkers}",
        "retrievers=[bm25],[dense],[dense,bm25]",
        "embedder=hashing",
        "fusion=rrf",
        "tracking=none",
        "sweep.allow_test_selection=true",  # the competitor scores the test split
        "sweep.report_winner=false",
        "progress=false",
        f"cache.dir={work / 'rag_lab' / 'cache'}",
        f"paths.experiments={work / 'rag_lab' / 'experiments'}",
    ]


def run_rag_lab(data: Path, work: Path) -> dict:
    base = rag_lab_command(data, work)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    exe = [sys.executable, "-m", "rag_lab.cli", "evaluate"]
    out: dict = {"command": "rag-lab evaluate " + " ".join(base[:-2])}
    shutil.rmtree(work / "rag_lab" / "cache", ignore_errors=True)
    for phase in ("cold", "warm"):
        sweep = work / "rag_lab" / f"sweep_{phase}"
        shutil.rmtree(sweep, ignore_errors=True)
        out[phase] = timed([*exe, *base, f"hydra.sweep.dir={sweep}"], env=env)
        print(f"rag_lab {phase}: {out[phase]}", flush=True)
    configs: dict[str, dict] = {}
    for phase in ("cold", "warm"):
        jobs = (work / "rag_lab" / f"sweep_{phase}").glob("*/metrics.json")
        for job in sorted(jobs, key=lambda p: int(p.parent.name)):
            overrides = (job.parent / ".hydra" / "overrides.yaml").read_text().splitlines()
            pick = [o.lstrip("- ").strip() for o in overrides]
            chunker = next(o for o in pick if o.startswith("chunker="))
            retrievers = next(o for o in pick if o.startswith("retrievers="))
            m = json.loads(job.read_text())
            name = f"{chunker} {retrievers}"
            row = {
                "ndcg@10": round(m["ndcg_at_10"], 4),
                "recall@10": round(m["recall_at_10"], 4),
                "scored_queries": int(m["n_queries"]),
                "n_chunks": int(m["n_chunks"]),
            }
            if phase == "warm" and configs.get(name) != row:
                sys.exit(f"warm run of {name} differs from the cold one: {row} vs {configs[name]}")
            configs[name] = row
    out["configurations"] = configs
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", default=os.environ.get("RAG_LAB_DATA", "../shared/data"))
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", choices=("both", "rag_lab", "context-grid"), default="both")
    args = ap.parse_args()
    data = (Path(args.data) / "scifact").resolve()
    work = Path(args.work or tempfile.mkdtemp(prefix="rag_lab_bench_grid_")).resolve()
    res: dict = {"load_average_before": list(os.getloadavg()), "cpus": os.cpu_count()}
    previous = (
        json.loads(Path(args.out).read_text()) if args.out and Path(args.out).exists() else {}
    )
    if args.only == "rag_lab":  # the other side as measured before (its load average with it)
        res["context_grid"] = previous.get("context_grid", {})
    else:
        res["context_grid"] = run_competitor(data, work)
    if args.only == "context-grid":
        res["rag_lab"] = previous["rag_lab"]
    else:
        res["rag_lab"] = run_rag_lab(data, work)
    res["load_average_after"] = list(os.getloadavg())
    cg, rl = res["context_grid"], res["rag_lab"]
    if cg:
        for phase in ("cold", "warm"):
            for unit in ("wall", "cpu"):
                ratio = cg[phase][f"{unit}_seconds"] / rl[phase][f"{unit}_seconds"]
                res[f"{phase}_ratio" if unit == "wall" else f"{phase}_cpu_ratio"] = round(ratio, 1)
    res["targets"] = TARGETS
    for phase in ("cold", "warm"):
        line = f"{phase}: rag_lab {rl[phase]['wall_seconds']:.1f} s"
        line += f" (cpu {rl[phase]['cpu_seconds']:.1f} s, peak {rl[phase]['peak_rss_mib']:.0f} MiB)"
        if cg:
            line += f", context-grid {cg[phase]['wall_seconds']:.1f} s"
            line += f" (cpu {cg[phase]['cpu_seconds']:.1f} s, peak {cg[phase]['peak_rss_mib']:.0f}"
            line += f" MiB): {res[phase + '_ratio']:.1f}x ({res[phase + '_cpu_ratio']:.1f}x in CPU)"
        target = TARGETS[f"{phase}_seconds"]
        print(f"{line}  [target <= {target:.0f} s, >= {TARGETS[phase + '_ratio']:.0f}x]")
    print("\nconfiguration: nDCG@10 (queries scored)")
    for name, row in rl["configurations"].items():
        print(f"  rag_lab {name:<42} {row['ndcg@10']:.4f} ({row['scored_queries']})")
    for name, row in cg.get("configurations", {}).items():
        print(f"  context-grid {name:<37} {row['ndcg@10']:.4f} ({row['scored_queries']})")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
