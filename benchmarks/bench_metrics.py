"""Retrieval-metric scoring time: 10,000 queries x 100 retrieved, the default metric list.

    python benchmarks/bench_metrics.py --out benchmarks/results/metrics.json

A synthetic, seeded run and qrels (1-5 judged documents per query, grades 1-2, some not
retrieved, some queries unanswerable, rounded scores so ties occur) scored with
``rag_lab.metrics.run_metrics`` + ``mean_metrics`` (what ``rag_lab.metrics.score.score`` calls),
against the per-query path (``query_metrics`` over ``ranked`` for each query: how ``run_metrics``
scored before it was vectorised) and ranx on the same data. Prints seconds (best of
``--repeats``), the speed-up, and the largest difference between the two paths (0: the values are
bit-for-bit the same).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from pathlib import Path

import numpy as np

NAMES = [
    "hit_rate@1", "hit_rate@5", "hit_rate@10", "recall@5", "recall@10", "recall@100",
    "precision@5", "precision@10", "noise_ratio@5", "noise_ratio@10", "mrr@10", "ndcg@10",
    "map@100",
]  # conf/evaluate.yaml's evaluation.metrics  # fmt: skip


def synthetic(n_queries: int, depth: int, n_docs: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for i in range(n_queries):
        qid = f"q{i}"
        docs = rng.choice(n_docs, size=depth, replace=False)
        scores = np.round(rng.normal(size=depth), 2)  # two decimals: ties, broken by id
        run[qid] = {f"d{d}": float(s) for d, s in zip(docs, scores)}
        n_rel = int(rng.integers(0, 6))
        judged = list(rng.choice(docs, size=min(n_rel, 3), replace=False)) + list(
            rng.integers(0, n_docs, size=n_rel - min(n_rel, 3))
        )
        qrels[qid] = {f"d{d}": int(rng.integers(1, 3)) for d in judged}
        if i % 17 == 0:
            qrels[qid][f"d{docs[0]}"] = 0  # a judged non-relevant document
    return run, qrels


def reference(run, qrels, names):
    """The per-query path: ``query_metrics`` over ``ranked`` for every query."""
    from rag_lab.metrics import query_metrics, ranked

    return {q: query_metrics(ranked(run.get(q, {})), g, names) for q, g in qrels.items()}


def best_of(fn, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-ranx", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from rag_lab.metrics import mean_metrics, run_metrics

    run, qrels = synthetic(args.queries, args.depth, args.docs)
    res: dict = {"n_queries": args.queries, "depth": args.depth, "metrics": NAMES}
    fast = best_of(lambda: mean_metrics(run_metrics(run, qrels, NAMES), NAMES), args.repeats)
    ref = best_of(lambda: mean_metrics(reference(run, qrels, NAMES), NAMES), args.repeats)
    a, b = run_metrics(run, qrels, NAMES), reference(run, qrels, NAMES)
    diff = max(abs(a[q][n] - b[q][n]) for q in b for n in NAMES if not math.isnan(b[q][n]))
    nan_same = all(math.isnan(a[q][n]) == math.isnan(b[q][n]) for q in b for n in NAMES)
    means_a, means_b = mean_metrics(a, NAMES), mean_metrics(b, NAMES)
    res.update(
        {
            "run_metrics_seconds": fast,
            "per_query_reference_seconds": ref,
            "speedup": ref / fast,
            "max_abs_diff_per_query": diff,
            "nan_pattern_identical": nan_same,
            "means_identical_at_4_decimals": all(
                round(means_a[n], 4) == round(means_b[n], 4) for n in NAMES
            ),
            "means": means_a,
        }
    )
    print(f"{args.queries} queries x {args.depth} retrieved, {len(NAMES)} metrics:")
    print(f"  run_metrics + mean_metrics  {fast:.3f} s")
    print(f"  per-query reference         {ref:.3f} s  (x{ref / fast:.1f})")
    print(f"  max |difference| per query  {diff:.2e}; NaN pattern identical: {nan_same}")
    if not args.skip_ranx:
        from ranx import Qrels, Run, evaluate

        ranx_names = [n for n in NAMES if not n.startswith("noise_ratio")]
        rq = Qrels({q: gs for q, gs in qrels.items() if any(g > 0 for g in gs.values())})
        rr = Run({q: run[q] for q in rq.keys()})
        evaluate(rq, rr, ranx_names, make_comparable=True)  # numba compiles: not scoring time
        t = best_of(lambda: evaluate(rq, rr, ranx_names, make_comparable=True), args.repeats)
        res["ranx_seconds"] = t
        print(f"  ranx.evaluate (its metrics) {t:.3f} s")
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
