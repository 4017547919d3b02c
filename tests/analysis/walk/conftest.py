"""A walk whose evaluator's per-query numbers are written down here (``walked``): what the
walk's rule and its report are tested against."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rag_lab.analysis.walk import plan_from_dict, run_walk

N = 20
IDS = [f"q{i:02d}" for i in range(N)]
CATS = ["code" if i % 2 else "prose" for i in range(N)]
# what each step's override does to the per-query hit rate (queries it turns into hits) and
# nDCG (added to every query), per split
EFFECTS = {
    "good=on": {"dev": ({1, 3}, 0.0), "test": ({2, 5, 7}, 0.0)},
    "bad_on_dev=on": {"dev": (set(), 0.0), "test": ({8, 9, 10, 11}, 0.0)},
    "ndcg_only=on": {"dev": (set(), 0.05), "test": (set(), -0.02)},
    "nothing=on": {"dev": (set(), 0.0), "test": (set(), 0.0)},
}
BAD_ON_DEV_HURTS = {0, 4}  # dev queries bad_on_dev turns into misses (base hits)
PLAN = {
    "name": "fake",
    "base": ["experiment=tutorial_rag"],
    "select_metric": "hit_rate@5",
    "tie_break": ["ndcg@10"],
    "metrics": ["hit_rate@5", "noise_ratio@5"],
    "ci": {"n_resamples": 500, "seed": 3},
    "lists": {"postprocess": []},
    "steps": [
        {"name": "good", "overrides": ["good=on"]},
        {"name": "bad_on_dev", "overrides": ["bad_on_dev=on"]},
        {"name": "model", "append": {"postprocess": ["cross_encoder"]}, "requires": ["x.model"]},
        {"name": "ndcg_only", "overrides": ["ndcg_only=on"]},
        {"name": "nothing", "overrides": ["nothing=on"]},
    ],
}


class Fake:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[str, ...], str]] = []

    def __call__(self, overrides: Sequence[str], split: str, run_dir: Path) -> pd.DataFrame:
        self.calls.append((tuple(overrides), split))
        assert f"dataset.split={split}" in overrides
        hit = np.array([1.0 if i % 4 == 0 else 0.0 for i in range(N)])
        ndcg = np.full(N, 0.3)
        for override in overrides:
            if override in EFFECTS:
                ids, dn = EFFECTS[override][split]
                hit[list(ids)] = 1.0
                ndcg += dn
            if override == "bad_on_dev=on" and split == "dev":
                hit[list(BAD_ON_DEV_HURTS)] = 0.0
        return pd.DataFrame(
            {
                "query_id": IDS,
                "category": CATS,
                "hit_rate_at_5": hit,
                "ndcg_at_10": ndcg,
                "noise_ratio_at_5": 1.0 - hit / 2,
            }
        )


@pytest.fixture(scope="session")
def walked(tmp_path_factory):
    fake = Fake()
    out = tmp_path_factory.mktemp("walk")
    result = run_walk(plan_from_dict(PLAN), fake, out, ["embedder=hashing"])
    return result, fake, out
