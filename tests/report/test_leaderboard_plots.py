"""Sweep plots as a reader sees them: params typed from a real job folder's overrides.yaml (a
sorted numeric axis with readable ticks), legends naming configurations, Chinese text drawn with
a CJK font (no "Glyph missing" warning)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import matplotlib.figure
import numpy as np
import pandas as pd
import pytest
import yaml

from rag_lab.report.figures import cjk_family
from rag_lab.report.leaderboard import (
    Trial,
    config_label,
    load_trials,
    parse_overrides,
    plot_by_category,
    plot_metric_vs_params,
    varying,
)

METRIC = "ndcg_at_10"
N = 40


def per_query(scores: np.ndarray, categories: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": [f"q{i:02d}" for i in range(N)],
            "category": [categories[i % len(categories)] for i in range(N)],
            METRIC: scores,
        }
    )


def write_job(sweep: Path, name: str, overrides: list[str], scores: np.ndarray) -> None:
    job = sweep / name
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (job / "metrics.json").write_text(json.dumps({METRIC: float(np.nanmean(scores))}))
    per_query(scores, ["colloquial", "exact_code"]).to_parquet(job / "per_query.parquet")


class Captured:
    """Figures as they are saved (``savefig`` patched), to read their axes back."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.figures: list[Any] = []
        original = matplotlib.figure.Figure.savefig

        def spy(fig: Any, *args: Any, **kwargs: Any) -> Any:
            fig.canvas.draw()  # tick labels are final only after a draw
            self.figures.append(
                {
                    "xticks": [t.get_text() for t in fig.axes[0].get_xticklabels()],
                    "xlim": fig.axes[0].get_xlim(),
                    "legend": [t.get_text() for t in fig.axes[0].get_legend().get_texts()],
                    "xdata": [
                        np.asarray(line.get_xdata(), dtype=float) for line in fig.axes[0].lines
                    ],
                }
            )
            return original(fig, *args, **kwargs)

        monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)


def test_parse_overrides_types_values() -> None:
    params = parse_overrides(
        [
            "fusion.k=60",
            "fusion.weights.dense=0.1915194503788923",
            "retrievers=[dense,bm25]",
            "+chunker.overlap=0",
            "reranker.enabled=false",
            "tracking.uri=sqlite\\:////tmp/x.db",
            "run_name='01'",
            "hydra.job.chdir=false",
        ]
    )
    assert params == {
        "fusion.k": 60,
        "fusion.weights.dense": 0.1915194503788923,
        "retrievers": "[dense,bm25]",
        "chunker.overlap": 0,
        "reranker.enabled": False,
        "tracking.uri": "sqlite:////tmp/x.db",
        "run_name": "01",
    }
    assert type(params["fusion.k"]) is int and type(params["run_name"]) is str


def test_numeric_params_from_job_folders_plot_sorted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(1)
    base = rng.uniform(0.3, 0.8, N)
    # job order is not value order; 100 < 60 as strings, not as numbers
    for job, (k, w) in enumerate([(60, 0.1915194503788923), (100, 0.75), (10, 0.5)]):
        write_job(
            tmp_path,
            str(job),
            [f"fusion.k={k}", f"fusion.weights.dense={w}", "dataset.split=dev"],
            np.clip(base + k / 1000, 0, 1),
        )
    trials = varying(load_trials(tmp_path))
    assert [t.params for t in trials] == [
        {"fusion.k": 60, "fusion.weights.dense": 0.1915194503788923},
        {"fusion.k": 100, "fusion.weights.dense": 0.75},
        {"fusion.k": 10, "fusion.weights.dense": 0.5},
    ]
    got = Captured(monkeypatch)
    paths = plot_metric_vs_params(trials, METRIC, tmp_path / "report", n_resamples=100)
    assert [p.name for p in paths] == [
        "ndcg_at_10_vs_fusion.k.png",
        "ndcg_at_10_vs_fusion.weights.dense.png",
    ]
    k_plot, w_plot = got.figures
    assert k_plot["xticks"] == ["10", "60", "100"]
    # the best-per-value line runs through the values in numeric order, at the values themselves
    assert k_plot["xdata"][-1].tolist() == [10.0, 60.0, 100.0]
    assert w_plot["xticks"] == ["0.1915", "0.5", "0.75"]


def test_category_legend_names_configurations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(2)
    trials = [
        Trial(
            str(i),
            {"fusion": fusion, "fusion.k": k},
            {},
            per_query(rng.uniform(0, 1, N), ["colloquial", "exact_code"]),
        )
        for i, (fusion, k) in enumerate([("rrf", 60), ("weighted", 0.3333333333)])
    ]
    got = Captured(monkeypatch)
    plot_by_category(trials, METRIC, tmp_path)
    (fig,) = got.figures
    assert sorted(fig["legend"]) == ["fusion=rrf, fusion.k=60", "fusion=weighted, fusion.k=0.3333"]
    assert config_label(Trial("7", {}, {}, trials[0].per_query)) == "7"


def test_chinese_labels_have_glyphs(tmp_path: Path) -> None:
    assert cjk_family() is not None, (
        "no CJK font: run scripts/install_system_deps.sh (fonts-wqy-microhei / fonts-noto-cjk)"
    )
    rng = np.random.default_rng(3)
    cats = ["口语", "安全", "exact_code"]
    trials = [
        Trial(str(i), {"分块": name}, {}, per_query(rng.uniform(0, 1, N), cats))
        for i, name in enumerate(["递归", "固定长度"])
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        by_cat = plot_by_category(trials, METRIC, tmp_path)
        paths = plot_metric_vs_params(trials, METRIC, tmp_path, n_resamples=100)
    assert by_cat is not None and len(paths) == 1
    glyphs = [str(w.message) for w in caught if "Glyph" in str(w.message)]
    assert glyphs == []


def test_a_figure_drawn_outside_pyplot_is_pyplots_png(tmp_path: Path) -> None:
    from rag_lab.report.figures import pyplot, subplots

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    own, own_ax = subplots(figsize=(6.4, 4.2))
    for a in (ax, own_ax):
        a.bar(["口语", "exact_code"], [0.4, 0.7], label="bars")
        a.set_title("ndcg_at_10 by category")
        a.legend()
    fig.savefig(tmp_path / "pyplot.png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    own.savefig(tmp_path / "own.png", dpi=100, bbox_inches="tight")
    assert (tmp_path / "own.png").read_bytes() == (tmp_path / "pyplot.png").read_bytes()


def test_a_plot_is_drawn_once_per_content_inside_a_figure_cache(tmp_path, monkeypatch):
    """Inside ``cached_in``, the same trials give the same PNG bytes without drawing again (a
    warm sweep's end imports no matplotlib); a changed score is drawn again."""
    from rag_lab.report import figures, leaderboard

    rng = np.random.default_rng(0)
    trials = [
        Trial(str(i), {"fusion.k": k}, {}, per_query(rng.random(N), ["a", "b"]))
        for i, k in enumerate((10, 30, 60))
    ]
    drawn: list[str] = []
    for name in ("_draw_metric_vs_params", "_draw_by_category"):
        real = getattr(leaderboard, name)

        def spy(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            drawn.append(_name)
            return _real(*a, **k)

        monkeypatch.setattr(leaderboard, name, spy)
    cache = tmp_path / "cache"

    def plot(out: Path, those: list[Trial]) -> dict[str, bytes]:
        with figures.cached_in(cache):
            paths = plot_metric_vs_params(those, METRIC, out, n_resamples=200)
            by_cat = plot_by_category(those, METRIC, out)
        assert by_cat is not None
        return {p.name: p.read_bytes() for p in [*paths, by_cat]}

    first = plot(tmp_path / "one", trials)
    assert sorted(first) == ["ndcg_at_10_by_category.png", "ndcg_at_10_vs_fusion.k.png"]
    assert len(drawn) == 2
    assert plot(tmp_path / "two", trials) == first  # read back, not drawn
    assert len(drawn) == 2
    assert len(list((cache / figures.NAMESPACE).glob("*/*"))) == 2
    changed = [
        trials[0],
        trials[1],
        Trial("2", {"fusion.k": 60}, {}, per_query(rng.random(N), ["a", "b"])),
    ]
    third = plot(tmp_path / "three", changed)
    assert len(drawn) == 4  # different scores: drawn again
    assert third["ndcg_at_10_vs_fusion.k.png"] != first["ndcg_at_10_vs_fusion.k.png"]
    # outside a figure cache every call draws
    plot_metric_vs_params(trials, METRIC, tmp_path / "four", n_resamples=200)
    assert len(drawn) == 5
