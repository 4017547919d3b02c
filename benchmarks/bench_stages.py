"""A stage on vs off, per query category, with paired bootstrap CIs (the sample dataset by default).

    python benchmarks/bench_stages.py --variant "postprocess=[rules]" \
        --variant "postprocess=[rules] postprocess.rules.as_of=2026-12-01" \
        --out benchmarks/results/stages.json

Runs the default pipeline (plus ``--base`` overrides) and each variant on ``--split``, then for
every category and overall: the mean of each ``--metric`` for base and variant, and the paired
bootstrap 95% CI of variant - base (``rag_lab.stats``). A stage that does nothing shows as 0.
Each side's ``cost`` is what its stages report per query in metrics.json (``<stage>/ms_per_query``,
``Measured``) and the query latency percentiles.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any


def run(overrides: list[str], out: Path, cache: Path) -> tuple[Any, dict[str, float]]:
    import pandas as pd
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from rag_lab.evaluate import evaluate
    from rag_lab.paths import CONFIG_DIR

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("evaluate", overrides=[*overrides, "tracking=none", f"cache.dir={cache}"])
    with open_dict(cfg):
        cfg.paths.output_dir = str(out)
        cfg.paths.experiments = str(out.parent)
    metrics = evaluate(cfg)
    cost = {
        k: float(v)
        for k, v in metrics.items()
        if k.endswith("ms_per_query") or k in ("query_p50_ms", "query_p95_ms")
    }
    return pd.read_parquet(out / "per_query.parquet").set_index("query_id"), cost


def compare(base: Any, variant: Any, metrics: list[str]) -> dict[str, Any]:
    import numpy as np

    from rag_lab.stats import paired_bootstrap_diff_ci

    out: dict[str, Any] = {}
    for cat in [*sorted(base["category"].dropna().unique()), "all"]:
        ids = base.index if cat == "all" else base.index[base["category"] == cat]
        row: dict[str, Any] = {"n_queries": int(len(ids))}
        for m in metrics:
            if m not in base.columns:
                continue
            a, b = base.loc[ids, m].to_numpy(float), variant.loc[ids, m].to_numpy(float)
            if np.isnan(a).all():
                continue  # unanswerable queries have no ranking metrics
            diff, low, high = paired_bootstrap_diff_ci(b, a)
            row[m] = {
                "base": float(np.nanmean(a)),
                "variant": float(np.nanmean(b)),
                "diff": diff,
                "ci95": [low, high],
            }
        out[str(cat)] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--variant", action="append", required=True, help="overrides, quoted")
    ap.add_argument("--base", default="", help="overrides of both sides, quoted")
    ap.add_argument("--split", default="test")
    ap.add_argument("--metric", action="append", default=None)
    ap.add_argument("--cache", type=Path, default=None, help="stage cache (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    metrics = args.metric or ["hit_rate_at_5", "ndcg_at_10", "evidence_hit_rate_at_5"]
    base_ov = [*shlex.split(args.base), f"dataset.split={args.split}"]
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache or Path(tmp) / "cache"
        base, base_cost = run(base_ov, Path(tmp) / "base", cache)
        result: dict[str, Any] = {
            "command": " ".join(["python", *sys.argv]),
            "base_cost": base_cost,
            "variants": {},
        }
        for i, v in enumerate(args.variant):
            table, cost = run([*base_ov, *shlex.split(v)], Path(tmp) / f"v{i}", cache)
            result["variants"][v] = {**compare(base, table, metrics), "cost": cost}
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
