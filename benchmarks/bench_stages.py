"""A stage on vs off, per query category, with paired bootstrap CIs (the sample dataset by default).

    python benchmarks/bench_stages.py --variant "postprocess=[rules]" \
        --variant "postprocess=[rules] postprocess.rules.as_of=2026-12-01" \
        --out benchmarks/results/stages.json

Runs the default pipeline (plus ``--base`` overrides) and each variant on ``--split``, then for
every category and overall: the mean of each ``--metric`` for base and variant, and the paired
bootstrap 95% CI of variant - base (``rag_lab.analysis.stats``). A stage that does nothing shows as
0. Each side's ``cost`` is what its stages report per query in metrics.json
(``<stage>/ms_per_query``, ``Measured``) and the query latency percentiles; its ``refusals`` the
retrieval-level refusal rates (``refusal_rate_unanswerable``, ``wrong_refusal_rate``,
``empty_result_rate``) and, with a fallback chain (``fallback=chain``), how many queries each level
answered, overall and per category (``fallback/level_<n>``, ``per_query.parquet``'s
``fallback_level``).

``--sweep DIR`` records a finished sweep beside the comparison (its ``report/leaderboard.csv`` and
``winner.json``: the dev leaderboard and the winner's report-split metrics), e.g. the stacked
configuration's sweep, whose winner is then the ``--variant`` compared with the plain hybrid.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from peak import peak_rss_mib  # benchmarks/peak.py (scripts run from benchmarks/)

REFUSAL_KEYS = ("refusal_rate_unanswerable", "wrong_refusal_rate", "empty_result_rate")


def refusals(metrics: dict[str, Any], table: Any) -> dict[str, Any]:
    """Refusal rates and, with a fallback chain, the queries each level answered."""
    out: dict[str, Any] = {k: metrics[k] for k in REFUSAL_KEYS if k in metrics}
    out.update({k: v for k, v in metrics.items() if k.startswith("fallback/level_")})
    if "fallback_level" in table.columns:
        by_cat = table.groupby("category")["fallback_level"].value_counts().unstack(fill_value=0)
        out["fallback_level_by_category"] = {
            str(c): {str(int(lv)): int(n) for lv, n in row.items() if n}
            for c, row in by_cat.iterrows()
        }
    return out


def run(overrides: list[str], out: Path, cache: Path) -> tuple[Any, dict[str, Any]]:
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
    table = pd.read_parquet(out / "per_query.parquet")
    return table.set_index("query_id"), {"cost": cost, "refusals": refusals(metrics, table)}


def compare(base: Any, variant: Any, metrics: list[str]) -> dict[str, Any]:
    import numpy as np

    from rag_lab.analysis.stats import paired_bootstrap_diff_ci

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


def sweep_summary(folder: Path, metrics: list[str]) -> dict[str, Any]:
    """A sweep folder's dev leaderboard (rank, the swept values, the objective with its CI and
    p-values) and its winner (overrides, dev objective, report-split ``metrics``)."""
    import pandas as pd

    board = pd.read_csv(folder / "report" / "leaderboard.csv")
    winner = json.loads((folder / "winner.json").read_text(encoding="utf-8"))
    report = winner.get("report") or {}
    return {
        "folder": str(folder),
        "leaderboard": json.loads(board.to_json(orient="records", force_ascii=False)),
        "winner": {
            "job": winner.get("job"),
            "overrides": winner.get("overrides"),
            "dev": {k: v for k, v in winner.items() if k not in ("job", "overrides", "report")},
            "report_split": {m: report[m] for m in metrics if m in report},
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--variant", action="append", required=True, help="overrides, quoted")
    ap.add_argument("--base", default="", help="overrides of both sides, quoted")
    ap.add_argument("--split", default="test")
    ap.add_argument("--metric", action="append", default=None)
    ap.add_argument("--cache", type=Path, default=None, help="stage cache (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--sweep", type=Path, default=None, help="a finished sweep folder to record")
    args = ap.parse_args()
    metrics = args.metric or ["hit_rate_at_5", "ndcg_at_10", "evidence_hit_rate_at_5"]
    base_ov = [*shlex.split(args.base), f"dataset.split={args.split}"]
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache or Path(tmp) / "cache"
        base, base_side = run(base_ov, Path(tmp) / "base", cache)
        result: dict[str, Any] = {
            "command": " ".join(["python", *sys.argv]),
            "base_cost": base_side["cost"],
            "base_refusals": base_side["refusals"],
            "variants": {},
        }
        for i, v in enumerate(args.variant):
            table, side = run([*base_ov, *shlex.split(v)], Path(tmp) / f"v{i}", cache)
            result["variants"][v] = {**compare(base, table, metrics), **side}
        if args.sweep:
            result["sweep"] = sweep_summary(args.sweep, metrics)
    result["peak_rss_mib"] = peak_rss_mib()
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
