"""multilingual-e5-small, torch fp32 against ONNX Runtime int8: does int8 lose retrieval quality?

    python benchmarks/bench_e5_backends.py --data ../shared/data \
        --out benchmarks/results/e5_backends.json
    python benchmarks/bench_e5_backends.py --sets sample          # the sample alone (~2 min)
    # subsets (a loaded machine): SciFact's 300 test queries over their judged documents + 300
    # others, CMRC 2018's first 1,000 queries over their paragraphs + 100 others
    python benchmarks/bench_e5_backends.py --data ../shared/data --subset scifact=300:300 \
        --subset cmrc2018=1000:100 --out benchmarks/results/e5_backends.json

Each cell is one ``rag-lab evaluate`` (``tracking=none``) in its own process, on the sample
(``dataset=sample``, the README's job), SciFact test (``dataset=scifact``: 300 queries, 5,183
whole documents) and CMRC 2018 (``dataset=cmrc2018``: 848 paragraphs), each retrieval-only:

- ``dense``: ``retrievers=[dense]`` (e5 alone);
- ``hybrid``: the shipped default, ``retrievers=[bm25,dense]`` fused by RRF (the dataset's
  tokenizer).

and each with ``embedder.backend=torch`` (fp32) and ``embedder.backend=onnx
embedder.quantize=int8``. Every run shares one stage cache (``--experiments``, default
``/tmp/rag_lab_e5_backends``): an embedding computed once (by the dense run) is read back by the
hybrid run of the same variant, so ``embed_seconds`` is the dense cell's. Prints nDCG@10 and
recall@10 per cell, the int8 − fp32 differences and the verdict against ``--tolerance`` (0.005
nDCG@10), and writes it all as JSON.

``--subset SET=Q:N`` evaluates ``SET`` on a smaller copy (written under ``--experiments``): the
first ``Q`` test queries (qrels order; 0 = all), every document they judge, and the first ``N``
other documents in corpus order. Its cells are named ``SET[Q:N]``: a development check when the
full set cannot be encoded twice in time, not the full set's number.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = {
    "torch_fp32": ["embedder.backend=torch", "embedder.quantize=none"],
    "onnx_int8": ["embedder.backend=onnx", "embedder.quantize=int8"],
}
RETRIEVERS = {"dense": "retrievers=[dense]", "hybrid": "retrievers=[bm25,dense]"}
SETS = ("sample", "scifact", "cmrc2018")
METRICS = ("ndcg_at_10", "recall_at_10")


def write_subset(data: Path, name: str, spec: str, root: Path) -> Path:
    """A BEIR folder holding the first ``Q`` test queries of ``data/name``, the documents they
    judge and the first ``N`` others (``spec`` = ``"Q:N"``)."""
    n_queries, n_others = (int(x) for x in spec.split(":"))
    src, out = data / name, root / f"{name}_{n_queries}_{n_others}"
    lines = (src / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], [line.split("\t") for line in lines[1:] if line.strip()]
    qids = list(dict.fromkeys(r[0] for r in rows))
    keep_q = set(qids[:n_queries] if n_queries else qids)
    rows = [r for r in rows if r[0] in keep_q]
    judged = {r[1] for r in rows}
    docs, others = [], 0
    for line in (src / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        doc_id = json.loads(line)["_id"]
        if doc_id in judged or others < n_others:
            others += doc_id not in judged
            docs.append(line)
    queries = [
        line
        for line in (src / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(line)["_id"] in keep_q
    ]
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    (out / "corpus.jsonl").write_text("\n".join(docs) + "\n", encoding="utf-8")
    (out / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    rows_text = "\n".join("\t".join(r) for r in rows)
    (out / "qrels" / "test.tsv").write_text(f"{header}\n{rows_text}\n", encoding="utf-8")
    return out


def run_cell(args, dataset: str, retrievers: str, variant: str, path: Path | None) -> dict:
    label = dataset if path is None else f"{dataset}_{path.name}"
    out_dir = Path(args.experiments) / "runs" / f"{label}-{retrievers}-{variant}"
    cmd = [
        sys.executable,
        "-m",
        "rag_lab.cli",
        "evaluate",
        f"dataset={dataset}",
        *([] if path is None else [f"dataset.path={path}"]),
        RETRIEVERS[retrievers],
        *VARIANTS[variant],
        "embedder=e5_small",
        "tracking=none",
        "evaluation.html_report=false",
        "evaluation.latency_queries=0",  # quality only: no one-at-a-time timing
        f"hydra.run.dir={out_dir}",
    ]
    env = {
        **os.environ,
        "RAG_LAB_EXPERIMENTS": str(args.experiments),
        "RAG_LAB_DATA": str(Path(args.data).resolve()),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    t0 = time.perf_counter()
    before = os.times()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    after = os.times()
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-2000:]}")
    m = json.loads((out_dir / "metrics.json").read_text())
    return {
        **{k: m[k] for k in METRICS},
        "embed_seconds": m.get("dense/embed_seconds"),
        "dense_from_cache": m.get("dense/run_from_cache"),
        "n_chunks": m.get("n_chunks"),
        "wall_seconds": time.perf_counter() - t0,
        "cpu_seconds": (after.children_user - before.children_user)
        + (after.children_system - before.children_system),
        "command": "rag-lab evaluate " + " ".join(cmd[4:-1]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", default=os.environ.get("RAG_LAB_DATA", "../shared/data"))
    ap.add_argument("--sets", default=",".join(SETS), help=f"comma-separated of {SETS}")
    ap.add_argument("--experiments", default="/tmp/rag_lab_e5_backends", help="shared stage cache")
    ap.add_argument("--tolerance", type=float, default=0.005, help="largest nDCG@10 loss allowed")
    ap.add_argument("--subset", action="append", default=[], help="SET=Q:N (see above); repeatable")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    subsets = dict(s.split("=", 1) for s in args.subset)
    res: dict = {"load_average_start": list(os.getloadavg()), "cells": {}, "verdict": {}}
    for dataset in args.sets.split(","):
        path, name = None, dataset
        if dataset in subsets:
            sub = Path(args.experiments) / "data"
            path = write_subset(Path(args.data), dataset, subsets[dataset], sub)
            name = f"{dataset}[{subsets[dataset]}]"
        for retrievers in RETRIEVERS:
            cell = {v: run_cell(args, dataset, retrievers, v, path) for v in VARIANTS}
            fp32, int8 = cell["torch_fp32"], cell["onnx_int8"]
            cell["int8_minus_fp32"] = {k: int8[k] - fp32[k] for k in METRICS}
            if fp32["embed_seconds"] and int8["embed_seconds"]:
                cell["embed_speedup"] = fp32["embed_seconds"] / int8["embed_seconds"]
            res["cells"][f"{name}/{retrievers}"] = cell
            d = cell["int8_minus_fp32"]
            speed = f"  embed x{cell['embed_speedup']:.2f}" if "embed_speedup" in cell else ""
            print(
                f"{name:9s} {retrievers:6s} nDCG@10 fp32 {fp32['ndcg_at_10']:.4f} "
                f"int8 {int8['ndcg_at_10']:.4f} ({d['ndcg_at_10']:+.4f})  recall@10 "
                f"{fp32['recall_at_10']:.4f} / {int8['recall_at_10']:.4f} "
                f"({d['recall_at_10']:+.4f}){speed}",
                flush=True,
            )
        losses = [res["cells"][f"{name}/{r}"]["int8_minus_fp32"]["ndcg_at_10"] for r in RETRIEVERS]
        res["verdict"][name] = "int8" if min(losses) >= -args.tolerance else "fp32"
    res["load_average_end"] = list(os.getloadavg())
    print("verdict (int8 where it loses at most", args.tolerance, "nDCG@10):", res["verdict"])
    if args.out:
        out = Path(args.out)
        old = json.loads(out.read_text()) if out.is_file() else {}
        old_cells = old.get("cells", {})
        res["cells"] = {**old_cells, **res["cells"]}
        res["verdict"] = {**old.get("verdict", {}), **res["verdict"]}
        out.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
