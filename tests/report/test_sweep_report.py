"""report.html of a sweep folder: leaderboard with CIs and Holm-adjusted p, plots inline, the
category x configuration table, per-query rows with the winner's chunks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rag_lab.cli.report import run as report_cli
from rag_lab.errors import ConfigError
from rag_lab.report import write_sweep_report
from tests.report.conftest import SCRIPT


@pytest.fixture(scope="module")
def page(sweep: Path) -> str:
    path = write_sweep_report(sweep)
    assert path == sweep / "report.html"
    return path.read_text(encoding="utf-8")


def test_leaderboard_rows(page: str, sweep: Path) -> None:
    board = page.split('<section id="leaderboard">', 1)[1].split("</section>", 1)[0]
    rows = re.findall(r"<tr( class=\"[^\"]*\")?><td[^>]*>(\d)</td><td[^>]*>(\d)</td>", board)
    assert [r[1] for r in rows] == ["1", "2"]  # ranks
    scores = {j: json.loads((sweep / j / "metrics.json").read_text())["ndcg_at_10"] for j in "01"}
    winner = max(scores, key=lambda j: scores[j])
    assert rows[0][2] == winner and 'class="best"' in rows[0][0]
    assert "p (Holm)" in board and "95% CI" in board
    # the swept params only (dataset.split is the same in both jobs), typed: fusion.k=60
    assert "<code>retrievers</code>=[bm25]" in board and "<code>fusion.k</code>=60" in board
    assert "dataset.split" not in board


def test_plots_tables_and_queries(page: str) -> None:
    figures = re.findall(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]+" alt="([^"]+)"', page)
    assert "ndcg at 10 by category" in figures and "ndcg at 10 vs fusion.k" in figures
    assert '<section id="categories">' in page
    assert page.count('<details class="q"') == 8  # the toy test split's queries
    assert SCRIPT not in page and page.count("<script>") == 1


def test_not_a_sweep_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no finished job"):
        write_sweep_report(tmp_path)
    assert report_cli([str(tmp_path)]) == 2


def test_the_sweep_end_hands_the_page_what_it_computed(sweep: Path, tmp_path: Path) -> None:
    import base64

    from rag_lab.metrics.names import higher_is_better
    from rag_lab.report.leaderboard import report_files
    from rag_lab.report.sweep_page import render_sweep, sweep_metric, sweep_trials

    trials, metric = sweep_trials(sweep), sweep_metric(sweep)
    board, files = report_files(
        trials, metric, tmp_path / "report", higher_is_better=higher_is_better(metric)
    )
    # the same jobs and leaderboard: the same page as one that reads and ranks them itself
    assert render_sweep(sweep, trials=trials, board=board) == render_sweep(sweep)
    pngs = [p for p in files.values() if p.suffix == ".png"]
    page = render_sweep(sweep, trials=trials, board=board, plots=pngs)
    figures = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]+)"', page)
    assert figures == [
        (base64.b64encode(p.read_bytes()).decode(), p.stem.replace("_", " ")) for p in pngs
    ]
    assert len(figures) == 3  # vs retrievers, vs fusion.k, by category
