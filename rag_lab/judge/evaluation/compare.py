"""Judges side by side on the same answers (``rag-lab judge`` with several ``--judge``): one row
per answer with every judge's score and verdict, each pair of judges' agreement, and the answers
where their verdicts differ, as a table (``judges_side_by_side.csv``) and a Markdown summary
with examples (``judges_side_by_side.md``). Verdicts as in
``rag_lab.judge.evaluation.calibration.verdict`` (the judge's own, else ``score >= threshold``); a
judge's missing score is missing, never a verdict, and a pair is compared on the answers both
scored.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

K = TypeVar("K", bound=Hashable)

__all__ = ["disagreement_markdown", "pairwise", "side_by_side"]


def side_by_side(
    items: Mapping[K, Mapping[str, Any]],
    scores: Mapping[str, Mapping[K, float | None]],
    verdicts: Mapping[str, Mapping[K, int | None]],
    labels: Mapping[K, int] | None = None,
) -> pd.DataFrame:
    """One row per item of ``items`` (``{key: {"run", "id", "query", "response"}}``): those
    columns, ``label`` (None without one), for each judge ``<judge>`` (its score) and
    ``<judge>_verdict`` (1/0/None), ``n_judged`` and ``disagree`` (the judges that scored it
    gave different verdicts)."""
    import pandas as pd

    labels = labels or {}
    rows = []
    for key, item in items.items():
        row: dict[str, Any] = {c: item[c] for c in ("run", "id", "query", "response")}
        row["label"] = labels.get(key)
        given = []
        for judge, by_item in scores.items():
            v = verdicts[judge].get(key)
            row[judge] = by_item.get(key)
            row[f"{judge}_verdict"] = v
            if v is not None:
                given.append(v)
        row["n_judged"] = len(given)
        row["disagree"] = len(set(given)) > 1
        rows.append(row)
    return pd.DataFrame(rows)


def pairwise(table: pd.DataFrame, judges: Sequence[str]) -> list[dict[str, Any]]:
    """For each pair of judges: ``n`` (answers both scored), ``agree`` (share of equal
    verdicts), ``kappa`` (Cohen's κ between their verdicts; None when undefined), ``n_disagree``,
    ``mean_abs_diff`` (mean |score difference|), and with labels on ``n_labelled`` of those
    answers ``a_right`` / ``b_right``: how many disagreements each judge got right."""
    from sklearn.metrics import cohen_kappa_score

    out = []
    for i, a in enumerate(judges):
        for b in judges[i + 1 :]:
            both = table[table[f"{a}_verdict"].notna() & table[f"{b}_verdict"].notna()]
            va = both[f"{a}_verdict"].astype(int).to_numpy()
            vb = both[f"{b}_verdict"].astype(int).to_numpy()
            kappa = math.nan
            if len(both):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    kappa = float(
                        cohen_kappa_score(va, vb, labels=[0, 1], replace_undefined_by=np.nan)
                    )
            dis = both[va != vb]
            lab = dis[dis["label"].notna()]
            out.append(
                {
                    "a": a,
                    "b": b,
                    "n": len(both),
                    "agree": float((va == vb).mean()) if len(both) else None,
                    "kappa": None if math.isnan(kappa) else kappa,
                    "n_disagree": len(dis),
                    "mean_abs_diff": float((both[a] - both[b]).abs().mean()) if len(both) else None,
                    "n_labelled": len(lab),
                    "a_right": int((lab[f"{a}_verdict"] == lab["label"]).sum()),
                    "b_right": int((lab[f"{b}_verdict"] == lab["label"]).sum()),
                }
            )
    return out


def _cell(text: Any, limit: int = 160) -> str:
    s = " ".join(str(text).split()).replace("|", "\\|")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _num(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def disagreement_markdown(
    table: pd.DataFrame,
    pairs: Sequence[Mapping[str, Any]],
    judges: Sequence[str],
    rules: Mapping[str, str],
    examples: int = 5,
    skipped: Mapping[str, str] | None = None,
) -> str:
    """The Markdown summary: judges compared (and skipped, with the reason), the pair table, and
    per pair up to ``examples`` answers they disagree on, largest score difference first."""
    lines = [
        "# Judges side by side",
        "",
        f"{len(table)} answers. Verdicts: "
        + "; ".join(f"`{j}` {rules.get(j, '')}" for j in judges)
        + ".",
    ]
    for name, why in (skipped or {}).items():
        lines.append(f"Skipped `{name}`: {why}")
    lines += [
        "",
        "| judge A | judge B | answers | agree | κ | disagree | mean abs diff | labelled "
        "disagreements | A right | B right |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in pairs:
        lines.append(
            f"| {p['a']} | {p['b']} | {p['n']} | {_num(p['agree'])} | {_num(p['kappa'])} | "
            f"{p['n_disagree']} | {_num(p['mean_abs_diff'])} | {p['n_labelled']} | "
            f"{p['a_right']} | {p['b_right']} |"
        )
    for p in pairs:
        a, b = p["a"], p["b"]
        both = table[table[f"{a}_verdict"].notna() & table[f"{b}_verdict"].notna()]
        dis = both[both[f"{a}_verdict"] != both[f"{b}_verdict"]]
        if dis.empty:
            continue
        dis = dis.assign(_gap=(dis[a] - dis[b]).abs()).sort_values("_gap", ascending=False)
        lines += [
            "",
            f"## {a} vs {b}: {len(dis)} disagreements (top {min(examples, len(dis))})",
            "",
            f"| run | id | query | response | {a} | {b} | label |",
            "|---|---|---|---|---|---|---|",
        ]
        for _, r in dis.head(examples).iterrows():
            label = "–" if r["label"] is None or r["label"] != r["label"] else int(r["label"])
            lines.append(
                f"| {_cell(r['run'], 40)} | {_cell(r['id'], 40)} | {_cell(r['query'], 80)} | "
                f"{_cell(r['response'])} | {_num(r[a])} | {_num(r[b])} | {label} |"
            )
    return "\n".join(lines) + "\n"
