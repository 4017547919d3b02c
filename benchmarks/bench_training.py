"""Issue 5 acceptance on BEIR SciFact (train split → test split): LoRA-tuned all-MiniLM-L6-v2 vs
the base model, a trained cross-encoder reranking BM25's top 100 vs BM25, the stacked grid
(base/tuned embedder × no/trained reranker, hybrid) as one MLflow sweep, reranker latency by
depth, training wall times. Each step is a ``rag-lab`` command; a step whose output exists is not
re-run (resumable).

    python benchmarks/bench_training.py --data ../shared/data --work /tmp/bench_training \\
        --out benchmarks/results/training.json

``--only-embedder`` runs just the LoRA embedder's training (the configured recipe) and its test
evaluation, and adds them to ``--out``: the command's wall time against the 30-minute budget,
time and peak resident memory per phase (``train_metrics.json``'s ``phases``), the process's
peak, and the paired comparison with the base model (``--base-run``: an existing
``rag-lab evaluate experiment=scifact_minilm`` folder, else it is evaluated too).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from rag_lab.analysis.stats import paired_bootstrap_diff_ci, randomization_test

RAG_LAB = [sys.executable, "-m", "rag_lab.cli"]


def step(name: str, args: list[str], done: Path, log_dir: Path, timings: dict) -> None:
    if done.exists():
        print(f"[{name}] done already ({done})", flush=True)
        return
    print(f"[{name}] rag-lab {' '.join(args)}", flush=True)
    t0 = time.perf_counter()
    with open(log_dir / f"{name}.log", "w") as log:
        rc = subprocess.run([*RAG_LAB, *args], stdout=log, stderr=subprocess.STDOUT).returncode
    timings[name] = time.perf_counter() - t0
    if rc != 0:
        sys.exit(f"[{name}] failed (exit {rc}); see {log_dir / f'{name}.log'}")
    print(f"[{name}] {timings[name]:.1f} s", flush=True)


def per_query(run_dir: Path, metric: str = "ndcg_at_10") -> pd.Series:
    t = pd.read_parquet(run_dir / "per_query.parquet")
    return t.set_index("query_id")[metric].dropna()


def compare(a_dir: Path, b_dir: Path, metric: str = "ndcg_at_10") -> dict:
    """b − a on the queries both scored: mean difference, paired-bootstrap 95% CI,
    randomisation p."""
    a, b = per_query(a_dir, metric), per_query(b_dir, metric)
    common = a.index.intersection(b.index)
    x, y = a[common].to_numpy(), b[common].to_numpy()
    mean, lo, hi = paired_bootstrap_diff_ci(y, x, n_resamples=5000, seed=0)
    return {
        "a": float(x.mean()),
        "b": float(y.mean()),
        "diff": float(mean),
        "ci95": [float(lo), float(hi)],
        "p_value": float(randomization_test(y, x, n_permutations=10000, seed=0)),
        "n_queries": int(len(common)),
    }


def rerank_latency(
    model: str, data: Path, work: Path, depths=(10, 20, 50, 100), n_queries: int = 10
) -> dict:
    """Per-query reranking time (no score cache) at each depth, BM25 candidates, one query at a
    time."""
    from rag_lab.dataset import BeirDataset
    from rag_lab.reranker import CrossEncoderReranker
    from rag_lab.retrievers.bm25 import BM25Retriever
    from rag_lab.tokenizer.english import EnglishTokenizer
    from rag_lab.types import Chunk

    ds = BeirDataset(str(data / "scifact"), "test").load()
    rows = [json.loads(line) for line in open(ds.corpus_sources[0])]
    chunks = {
        r["_id"]: Chunk(r["_id"], r["_id"], r["text"], 0, len(r["text"]), r.get("title", ""))
        for r in rows
    }
    bm25 = BM25Retriever(EnglishTokenizer())
    bm25.index(list(chunks.values()))
    qids = list(ds.queries)[:n_queries]
    queries = {q: ds.queries[q].text for q in qids}
    run = bm25.retrieve(queries, max(depths))
    rr = CrossEncoderReranker(model, depth=max(depths), cache_dir=None)
    rr.rerank({qids[0]: queries[qids[0]]}, {qids[0]: run[qids[0]]}, chunks)  # load + warm up
    out = {}
    for d in depths:
        rr.depth = d
        times = []
        for q in qids:
            t0 = time.perf_counter()
            rr.rerank({q: queries[q]}, {q: run[q]}, chunks)
            times.append(1000 * (time.perf_counter() - t0))
        out[str(d)] = {
            "ms_per_query_mean": float(np.mean(times)),
            "ms_per_query_p95": float(np.percentile(times, 95)),
        }
        print(f"  rerank depth {d}: {out[str(d)]['ms_per_query_mean']:.0f} ms/query", flush=True)
    return out


def metrics(d: Path) -> dict:
    m = json.loads((d / "metrics.json").read_text())
    return {
        k: m[k]
        for k in (
            "ndcg_at_10",
            "recall_at_10",
            "mrr_at_10",
            "recall_at_100",
            "query_p50_ms",
            "reranker/ms_per_query",
            "reranker/pairs_scored",
            "reranker/pairs_cached",
            "reranker/interpolation",
        )
        if k in m
    }


def recipe(run_dir: Path) -> dict:
    """The ``train`` settings the run used (Hydra's saved config)."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    out: dict = OmegaConf.to_container(cfg.train, resolve=False)  # type: ignore[assignment]
    return out


def only_embedder(args, prev: dict, emb: Path, base_run: Path, w: Path, timings: dict) -> None:
    """The LoRA embedder's recipe, its budget and phases, added to ``--out``."""
    train = json.loads((emb / "train_metrics.json").read_text())
    wall = timings.get("train_embedder")
    result = {
        "command_wall_seconds": wall,
        "budget_seconds": args.budget_seconds,
        "within_budget": wall is not None and wall <= args.budget_seconds,
        "recipe": recipe(emb),
        "train_metrics": {k: v for k, v in train.items() if k not in ("loss_curve",)},
        "test": metrics(w / "eval_minilm_lora"),
        "base_test": metrics(base_run),
        "vs_base": compare(base_run, w / "eval_minilm_lora"),
        "load_average_after": list(os.getloadavg()),
    }
    out = {**prev, "timings_seconds": timings, "lora_recipe": result}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2, default=float))
    t = result["test"]["ndcg_at_10"]
    print(
        f"LoRA recipe: test nDCG@10 {t:.4f} (base {result['base_test']['ndcg_at_10']:.4f}); "
        f"train command {wall if wall is None else round(wall)} s of {args.budget_seconds:.0f} s; "
        f"peak RSS {train.get('peak_rss_mib', float('nan')):.0f} MiB"
    )
    for name, ph in train.get("phases", {}).items():
        print(f"  {name:12s} {ph['seconds']:8.1f} s  peak {ph['peak_rss_mib']:7.0f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, required=True, help="folder holding scifact/")
    ap.add_argument(
        "--work", type=Path, required=True, help="scratch folder (runs, models, cache, MLflow)"
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/training.json"))
    ap.add_argument("--grid-depth", type=int, default=30, help="rerank depth in the stacked grid")
    ap.add_argument(
        "--rerank-depth", type=int, default=100, help="rerank depth of BM25's candidates"
    )
    ap.add_argument(
        "--embedder-args",
        help="train embedder overrides (space separated; default: train_embedder.yaml's recipe)",
        default="train.leakage=drop",
    )
    ap.add_argument(
        "--only-embedder", action="store_true", help="the LoRA embedder part only (see above)"
    )
    ap.add_argument(
        "--base-run", type=Path, default=None, help="--only-embedder: the base model's eval folder"
    )
    ap.add_argument("--budget-seconds", type=float, default=1800.0)
    ap.add_argument(
        "--reranker-args",
        help="train reranker overrides (space separated; default: the README's run)",
        default="train.leakage=drop train.max_length=128 train.learning_rate=2e-4 "
        "train.max_steps=40 train.eval_steps=20 train.warmup_ratio=0.05",
    )
    args = ap.parse_args()
    w = args.work.resolve()
    (w / "logs").mkdir(parents=True, exist_ok=True)
    os.environ["RAG_LAB_DATA"] = str(args.data.resolve())
    common = [f"paths.experiments={w}", f"cache.dir={w / 'cache'}"]
    timings: dict[str, float] = {}
    results: dict = {"timings_seconds": timings}
    prev = json.loads(args.out.read_text()) if args.out.exists() else {}
    timings.update(prev.get("timings_seconds", {}))

    emb, rr = w / "train_embedder", w / "train_reranker"
    step(
        "train_embedder",
        [
            "train",
            "embedder",
            "dataset=scifact",
            "dataset.split=train",
            "embedder=minilm",
            f"hydra.run.dir={emb}",
            *common,
            *args.embedder_args.split(),
        ],
        emb / "train_metrics.json",
        w / "logs",
        timings,
    )
    base_run = args.base_run.resolve() if args.base_run else w / "eval_minilm"
    step(
        "eval_minilm",
        ["evaluate", "experiment=scifact_minilm", f"hydra.run.dir={base_run}", *common],
        base_run / "metrics.json",
        w / "logs",
        timings,
    )
    step(
        "eval_minilm_lora",
        [
            "evaluate",
            "experiment=scifact_minilm",
            "embedder=lora",
            f"embedder.adapter={emb / 'adapter'}",
            "run_name=scifact minilm+lora",
            f"hydra.run.dir={w / 'eval_minilm_lora'}",
            *common,
        ],
        w / "eval_minilm_lora" / "metrics.json",
        w / "logs",
        timings,
    )
    if args.only_embedder:
        only_embedder(args, prev, emb, base_run, w, timings)
        return
    step(
        "train_reranker",
        [
            "train",
            "reranker",
            "dataset=scifact",
            "dataset.split=train",
            "retrievers=[bm25]",
            "train.model=sentence-transformers/all-MiniLM-L6-v2",
            f"hydra.run.dir={rr}",
            *common,
            *args.reranker_args.split(),
        ],
        rr / "train_metrics.json",
        w / "logs",
        timings,
    )
    step(
        "eval_bm25",
        ["evaluate", "experiment=scifact_bm25", f"hydra.run.dir={w / 'eval_bm25'}", *common],
        w / "eval_bm25" / "metrics.json",
        w / "logs",
        timings,
    )
    for name, extra in [
        ("eval_bm25_rerank", []),
        ("eval_bm25_rerank_pure", ["reranker.interpolation=1.0"]),
    ]:
        step(
            name,
            [
                "evaluate",
                "experiment=scifact_bm25",
                "reranker=cross_encoder",
                f"reranker.model={rr / 'model'}",
                f"reranker.depth={args.rerank_depth}",
                f"run_name='scifact bm25 + reranker {' '.join(extra)}'",
                f"hydra.run.dir={w / name}",
                *common,
                *extra,
            ],
            w / name / "metrics.json",
            w / "logs",
            timings,
        )
    grid = w / "grid"
    # the tuned embedder as a config option (Hydra search path), so the grid reuses its cached
    # embeddings
    (w / "conf" / "embedder").mkdir(parents=True, exist_ok=True)
    (w / "conf" / "embedder" / "tuned.yaml").write_text(
        f"defaults:\n  - lora\n  - _self_\nadapter: {emb / 'adapter'}\n"
    )
    step(
        "stacked_grid",
        [
            "evaluate",
            "-m",
            "experiment=scifact_hybrid",
            f"hydra.searchpath=[file://{w / 'conf'}]",
            "embedder=minilm,tuned",
            "reranker=cross_encoder",
            f"reranker.model={rr / 'model'}",
            f"reranker.depth=0,{args.grid_depth}",
            "sweep.allow_test_selection=true",
            "sweep.report_winner=false",
            f"hydra.sweep.dir={grid}",
            *common,
        ],
        grid / "report" / "leaderboard.csv",
        w / "logs",
        timings,
    )

    results["train_embedder"] = {
        k: v
        for k, v in json.loads((emb / "train_metrics.json").read_text()).items()
        if not isinstance(v, (list, dict))
    }
    results["train_reranker"] = {
        k: v
        for k, v in json.loads((rr / "train_metrics.json").read_text()).items()
        if not isinstance(v, list)
    }
    for name in (
        "eval_minilm",
        "eval_minilm_lora",
        "eval_bm25",
        "eval_bm25_rerank",
        "eval_bm25_rerank_pure",
    ):
        results[name] = metrics(w / name)
    results["lora_vs_base"] = compare(w / "eval_minilm", w / "eval_minilm_lora")
    results["rerank_depth"] = args.rerank_depth
    results["rerank_vs_bm25"] = compare(w / "eval_bm25", w / "eval_bm25_rerank")
    results["rerank_pure_vs_bm25"] = compare(w / "eval_bm25", w / "eval_bm25_rerank_pure")
    lb = pd.read_csv(grid / "report" / "leaderboard.csv")
    results["stacked_grid"] = lb.to_dict(orient="records")
    if "rerank_latency_ms" not in prev:
        results["rerank_latency_ms"] = rerank_latency(str(rr / "model"), args.data.resolve(), w)
    else:
        results["rerank_latency_ms"] = prev["rerank_latency_ms"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=float))
    print(
        json.dumps(
            {k: v for k, v in results.items() if k != "stacked_grid"}, indent=2, default=float
        )
    )
    print(lb.to_string())


if __name__ == "__main__":
    main()
