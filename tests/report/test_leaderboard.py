"""rag_lab.report.leaderboard on four synthetic trials over 60 queries in two categories: A clearly
best, B = A plus tiny zero-mean noise (indistinguishable), C and D clearly worse."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rag_lab.report.leaderboard import (
    Trial,
    leaderboard,
    plot_by_category,
    plot_metric_vs_params,
    to_markdown,
    write_report,
)

METRIC = "ndcg_at_10"
FAST = {"n_resamples": 500, "n_permutations": 500}
N = 60
UNANSWERABLE = 4  # the last queries have no relevant document: NaN ndcg in every trial


def make_trial(name: str, params: dict, scores: np.ndarray, categories: bool = True) -> Trial:
    scores = scores.copy()
    scores[-UNANSWERABLE:] = np.nan
    hit = (scores > 0.4).astype(float)
    hit[-UNANSWERABLE:] = np.nan
    per_query = pd.DataFrame(
        {
            "query_id": [f"q{i:02d}" for i in range(N)],
            "text": [f"query {i}" for i in range(N)],
            "category": (["factoid", "multi_hop"] * (N // 2)) if categories else [None] * N,
            "n_relevant": [0 if i >= N - UNANSWERABLE else 1 for i in range(N)],
            METRIC: scores,
            "hit_rate_at_5": hit,
        }
    )
    metrics = {
        METRIC: float(np.nanmean(scores)),
        "hit_rate_at_5": float(np.nanmean(hit)),
        "n_queries": N,
    }
    return Trial(name, params, metrics, per_query)


@pytest.fixture(scope="module")
def trials() -> list[Trial]:
    return build_trials()


def build_trials(categories: bool = True) -> list[Trial]:
    rng = np.random.default_rng(0)
    a = rng.uniform(0.35, 0.85, N)
    jitter = rng.normal(0, 0.02, N)
    # B: A shifted by 0.001 plus zero-mean noise, so the paired difference is tiny by construction
    b = a - 0.001 + (jitter - jitter.mean())
    c = a - 0.15 + rng.normal(0, 0.05, N)
    d = a - 0.30 + rng.normal(0, 0.05, N)
    # listed out of order, so the ranking has to do the sorting
    return [
        make_trial("C", {"fusion": "weighted", "fusion.k": 10}, c, categories),
        make_trial("A", {"fusion": "rrf", "fusion.k": 60}, a, categories),
        make_trial("D", {"fusion": "weighted", "fusion.k": 1000}, d, categories),
        make_trial("B", {"fusion": "rrf", "fusion.k": 100}, b, categories),
    ]


@pytest.fixture(scope="module")
def board(trials: list[Trial]) -> pd.DataFrame:
    return leaderboard(trials, METRIC, **FAST)


def test_ordering_and_ranks(board: pd.DataFrame) -> None:
    assert board["name"].tolist() == ["A", "B", "C", "D"]
    assert board["rank"].tolist() == [1, 2, 3, 4]
    assert board[METRIC].is_monotonic_decreasing


def test_floors_rank_the_trials_that_meet_them_first(trials: list[Trial]) -> None:
    # A and B (the two best) fall below a hit-rate floor that C and D meet: as in the sweep's
    # winner pick, the floor decides before the metric
    lowered = [
        Trial(t.name, t.params, {**t.metrics, "hit_rate_at_5": hit}, t.per_query)
        for t in trials
        for hit in [0.1 if t.name in ("A", "B") else 0.9]
    ]
    board = leaderboard(lowered, METRIC, floors={"hit_rate@5": 0.5}, **FAST)
    assert board["name"].tolist() == ["C", "D", "A", "B"]
    assert board["meets_floors"].tolist() == [True, True, False, False]
    assert "meets_floors" not in leaderboard(trials, METRIC, **FAST).columns


def test_significance_marks(board: pd.DataFrame) -> None:
    marks = dict(zip(board["name"], board["indistinguishable"], strict=True))
    assert marks == {"A": True, "B": True, "C": False, "D": False}
    assert board["p_vs_winner"].between(0, 1).all()
    assert board.loc[0, "p_vs_winner"] == 1.0
    assert board.loc[board["name"] == "C", "p_vs_winner"].item() < 0.01
    assert board.loc[0, "delta_vs_winner"] == 0.0
    assert (board["delta_vs_winner"].iloc[1:] < 0).all()


def test_holm_adjusts_across_the_non_winners(board: pd.DataFrame) -> None:
    """p_holm is Holm's step-down over the three comparisons with the winner, by formula."""
    raw = board["p_vs_winner"].iloc[1:].to_numpy()
    order = np.argsort(raw)
    expected = np.empty(3)
    running = 0.0
    for j, i in enumerate(order):
        running = max(running, min(1.0, (3 - j) * raw[i]))
        expected[i] = running
    assert board["p_holm"].iloc[1:].to_numpy() == pytest.approx(expected)
    assert board.loc[0, "p_holm"] == 1.0
    assert (board["p_holm"] >= board["p_vs_winner"]).all()
    assert board["indistinguishable"].tolist() == (board["p_holm"] >= 0.05).tolist()


def test_ci_contains_mean_and_matches_metrics_json(
    board: pd.DataFrame, trials: list[Trial]
) -> None:
    assert ((board["ci_low"] <= board[METRIC]) & (board[METRIC] <= board["ci_high"])).all()
    assert (board["ci_low"] < board["ci_high"]).all()
    by_name = {t.name: t.metrics[METRIC] for t in trials}
    assert board[METRIC].tolist() == pytest.approx([by_name[n] for n in board["name"]])


def test_columns_params_and_headline(board: pd.DataFrame) -> None:
    assert board.columns[:4].tolist() == ["rank", "name", "fusion", "fusion.k"]
    assert board.loc[0, "fusion.k"] == 60
    # headline metrics: only those present in metrics.json, never the ranked metric twice
    assert "hit_rate_at_5" in board.columns and "recall_at_100" not in board.columns
    assert board.columns.tolist().count(METRIC) == 1


def test_lower_is_better_reverses(trials: list[Trial]) -> None:
    board = leaderboard(trials, METRIC, higher_is_better=False, **FAST)
    assert board["name"].tolist() == ["D", "C", "B", "A"]
    assert board["indistinguishable"].tolist() == [True, False, False, False]


def test_missing_metric_column_is_named(trials: list[Trial]) -> None:
    with pytest.raises(KeyError, match="mrr_at_10"):
        leaderboard(trials, "mrr_at_10", **FAST)


def test_markdown_table(board: pd.DataFrame) -> None:
    md = to_markdown(board, METRIC)
    lines = md.strip().splitlines()
    table = [ln for ln in lines if ln.startswith("|")]
    assert table[0].startswith("| rank | name | fusion | fusion.k | ndcg_at_10 |")
    assert "≈ winner" in table[0]
    assert re.fullmatch(r"\|(-{3}:?\|)+", table[1])
    assert len(table) == 2 + 4
    assert all(ln.count("|") == table[0].count("|") for ln in table)
    assert re.search(r"\| 0\.\d{4} \|", table[2])  # 4-decimal floats
    assert "| winner |" in table[2] and "| ≈ |" in table[3]
    assert any(ln.startswith("≈ winner:") and "p_holm ≥ 0.05" in ln for ln in lines)


def test_write_report_files(trials: list[Trial], board: pd.DataFrame, tmp_path: Path) -> None:
    out = write_report(trials, METRIC, tmp_path / "report", **FAST)
    assert set(out) == {
        "leaderboard.csv",
        "leaderboard.md",
        "ndcg_at_10_vs_fusion.png",
        "ndcg_at_10_vs_fusion.k.png",
        "ndcg_at_10_by_category.png",
    }
    for path in out.values():
        assert path.is_file() and path.parent == tmp_path / "report"
    for name, path in out.items():
        if name.endswith(".png"):
            assert path.read_bytes().startswith(b"\x89PNG")
    back = pd.read_csv(out["leaderboard.csv"])
    pd.testing.assert_frame_equal(back, board, check_exact=False, rtol=1e-12)
    assert out["leaderboard.md"].read_text(encoding="utf-8") == to_markdown(board, METRIC)
    # a board read back from CSV (attrs lost) renders the same table rows
    assert to_markdown(back, METRIC).splitlines()[:6] == to_markdown(board, METRIC).splitlines()[:6]


def test_plots_skip_one_trial(trials: list[Trial], tmp_path: Path) -> None:
    one = [t for t in trials if t.name == "A"]
    assert plot_metric_vs_params(one, METRIC, tmp_path) == []
    out = write_report(one, METRIC, tmp_path, **FAST)
    assert set(out) == {"leaderboard.csv", "leaderboard.md", "ndcg_at_10_by_category.png"}
    board = pd.read_csv(out["leaderboard.csv"])
    assert board["name"].tolist() == ["A"] and board["p_vs_winner"].tolist() == [1.0]


def test_plots_skip_without_categories(tmp_path: Path) -> None:
    plain = build_trials(categories=False)
    assert plot_by_category(plain, METRIC, tmp_path) is None
    out = write_report(plain, METRIC, tmp_path, **FAST)
    assert not any("by_category" in name for name in out)


def test_single_valued_param_is_not_plotted(trials: list[Trial], tmp_path: Path) -> None:
    same = [
        Trial(t.name, {**t.params, "retriever": "bm25"}, t.metrics, t.per_query) for t in trials
    ]
    paths = plot_metric_vs_params(same, METRIC, tmp_path, n_resamples=200)
    assert sorted(p.name for p in paths) == [
        "ndcg_at_10_vs_fusion.k.png",
        "ndcg_at_10_vs_fusion.png",
    ]


def test_unknown_option_is_rejected(trials: list[Trial], tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="n_bootstrap"):
        write_report(trials, METRIC, tmp_path, n_bootstrap=10)


def test_direction_defaults_to_the_metrics_own(trials: list[Trial]) -> None:
    """A lower-is-better metric (here ``evidence_noise_ratio_at_5``) ranks ascending without being
    told: the direction comes from ``rag_lab.metrics.names.higher_is_better``."""
    key = "evidence_noise_ratio_at_5"
    renamed = [
        Trial(t.name, t.params, {key: t.metrics[METRIC]}, t.per_query.rename(columns={METRIC: key}))
        for t in trials
    ]
    board = leaderboard(renamed, key, **FAST)
    assert board["name"].tolist() == ["D", "C", "B", "A"]
    assert board.attrs["higher_is_better"] is False
    assert "lower is better" in to_markdown(board, key)
    # the headline columns are the one list in rag_lab.metrics.names
    from rag_lab.metrics.names import HEADLINE
    from rag_lab.report import leaderboard as report

    assert report.HEADLINE is HEADLINE
