"""MLflow's own UI, in headless Chromium at 1400 px, against a real ``mlflow server`` on
PostgreSQL (``rag-lab tracking-server``) after a real ``rag-lab evaluate`` on the sample (issue 31):

- the link ``evaluate`` prints (``mlflow runs: ...``) opens the experiment's runs as model
  training, in rag_lab's saved view: the headline metrics are the first metric columns, in
  ``HEADLINE`` order, with the run's values (those of its ``metrics.json``), sorted by
  ``ndcg_at_10``;
- a trace with its RETRIEVER span selected shows the span's documents by their document ids
  (``doc_uri``: the first metadata entry, the one MLflow shows beside each document);
- the trace's assessments pane shows ``hit_at_5`` and ``first_relevant_rank`` with the query's
  values from ``per_query.parquet``.

Each page is a screenshot (checked: 1400 x 1000, not one flat colour) and the text of the DOM
part a user reads, both written by ``scripts/mlflow_ui_check.py`` (the tool behind the docs'
description, docs/mlflow.md). Skipped only where PostgreSQL's server programs or Chromium are
absent (``bash scripts/install_system_deps.sh`` installs both; CI runs it)."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from rag_lab.metrics.names import HEADLINE
from rag_lab.tracking.mlflow import RUNS_VIEW_NAME, runs_page_url
from tests.cli.helpers import ENV, rag_lab
from tests.tracking.test_postgres_server import needs_postgres, server_dir  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mlflow_ui_check", ROOT / "scripts" / "mlflow_ui_check.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


ui = _script()
needs_chromium = pytest.mark.skipif(
    ui.browser() is None,
    reason="no Chromium on PATH (scripts/install_system_deps.sh installs the `chromium` package)",
)


def _not_blank(png: Path) -> None:
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("L"), dtype=np.float64)
    assert pixels.shape == (ui.HEIGHT, ui.WIDTH), png
    # a blank page, a spinner or an error page is nearly one flat colour; MLflow's pages have
    # text, tables and borders
    assert pixels.std() > 20, png
    assert (pixels < 128).mean() > 0.01, png


@needs_postgres
@needs_chromium
@pytest.mark.slow  # a first server start creates MLflow's tables; an evaluate; three pages
@pytest.mark.exclusive  # a machine-wide service: one such test at a time
@pytest.mark.timeout(900)
def test_mlflow_ui_shows_headline_columns_retriever_documents_and_assessments(
    server_dir,  # noqa: F811
    tmp_path,
):
    started = rag_lab("tracking-server", "start", "--dir", str(server_dir), "--port", "0")
    assert started.returncode == 0, started.stderr
    uri = started.stdout.strip()
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "rag_lab.cli", "evaluate"),
            "dataset=sample",
            "embedder=hashing",
            "dataset.split=test",
            "tracking=server",
            "tracking.experiment=ui_check",
            "tracking.traces=sample:5",
            f"hydra.run.dir={out}",
            f"paths.experiments={tmp_path / 'exp'}",
            "progress=false",
        ],
        env={**ENV, "MLFLOW_TRACKING_URI": uri},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = re.search(r"^  mlflow runs: (\S+)$", proc.stdout, re.M)
    assert printed, proc.stdout[-2000:]

    seen = ui.check(uri, "ui_check", tmp_path / "shots")
    assert seen.run_id == (out / "mlflow_run_id").read_text().strip()
    assert not seen.page_errors  # no uncaught exception in MLflow's pages
    for page in seen.pages.values():
        _not_blank(page.png)
        assert (tmp_path / "shots" / f"{page.name}.txt").read_text() == page.text

    # (a) the landing rag_lab links to: runs, in rag_lab's view, headline columns first
    runs = seen.pages["runs"]
    experiment_id = re.search(r"#/experiments/(\d+)/", printed.group(1))
    assert experiment_id and printed.group(1) == runs_page_url(uri, experiment_id.group(1))
    assert runs.url.startswith(printed.group(1))  # MLflow adds the view's sort to the address
    assert "Model training" in runs.text and RUNS_VIEW_NAME in runs.text
    assert "Sort: ndcg_at_10" in runs.text
    shown = [h[len("metrics.`") : -1] for h in runs.extra["headers"] if h.startswith("metrics.")]
    assert len(shown) >= 4 and shown == list(HEADLINE[: len(shown)]), runs.extra["headers"]
    assert runs.extra["headers"].index("metrics.`ndcg_at_10`") < runs.extra["headers"].index(
        "duration"
    )  # before the attribute columns a user scrolls past
    metrics = json.loads((out / "metrics.json").read_text())
    for name in shown:
        cell = runs.extra["cells"][name]
        assert float(cell) == pytest.approx(metrics[name], rel=1e-9), (name, cell)

    # (b) the retriever span's documents, by document id
    docs = seen.pages["trace_documents"]
    # the span's top 3 as logged (document ids, not chunk ids: ``<doc>#<n>``)
    assert len(seen.doc_ids) == 3 and not any("#" in d for d in seen.doc_ids), seen.doc_ids
    assert seen.query in docs.text and seen.retriever in {"bm25", "dense"}
    for doc in seen.doc_ids:
        assert re.search(rf'doc_uri\s*:\s*"{re.escape(doc)}"', docs.text), (doc, docs.text[:2000])

    # (c) the trace's assessments, with the query's own outcome
    pane = seen.pages["trace_assessments"]
    row = pd.read_parquet(out / "per_query.parquet").set_index("query_id").loc[seen.query_id]
    hit = "True" if row["hit_rate_at_5"] == 1.0 else "False"
    assert re.search(rf"hit_at_5\s+{hit}\b", pane.text), pane.text
    rank = round(1 / row["mrr_at_10"]) if row["mrr_at_10"] > 0 else None
    found = re.search(r"first_relevant_rank\s+(\d+)", pane.text)
    assert found, pane.text
    if rank is not None:  # mrr@10 sees the first ten; the assessment the whole ranking
        assert int(found.group(1)) == rank
    assert not math.isnan(row["hit_rate_at_5"])


PAGE = """<!doctype html><html><body style="font: 16px sans-serif">
<div id="app">loading</div>
<script>
  // renders late, like a single-page app; a click shows more; an error is uncaught
  setTimeout(() => {
    document.getElementById('app').innerHTML =
      '<h1>runs</h1><button onclick="document.getElementById(\\'pane\\').innerText = ' +
      '\\'hit_at_5 True\\'">Assess</button><div id="pane" data-testid="pane"></div>' +
      '<table border="1">' + '<tr><td>ndcg_at_10</td><td>0.6417</td></tr>'.repeat(30) + '</table>';
    setTimeout(() => { throw new Error('boom'); }, 0);
  }, 700);
</script></body></html>"""


@needs_chromium
def test_the_driver_waits_for_a_late_page_clicks_and_screenshots(tmp_path):
    """scripts/mlflow_ui_check.py's Chromium over the DevTools protocol, on a page that renders
    700 ms after loading: read once rendered (not before), a click changes it, the screenshot is
    the window's size and not blank, uncaught exceptions are collected; a page that never shows
    the text fails in the given time with what it showed."""
    page = tmp_path / "page.html"
    page.write_text(PAGE, encoding="utf-8")
    with ui.chromium() as tab:
        tab.open(page.as_uri())
        assert "ndcg_at_10" not in tab.text()  # not rendered yet
        assert "0.6417" in tab.wait_for("runs", "ndcg_at_10", timeout=60)
        assert tab.text('[data-testid="pane"]') == ""
        assert tab.click_text("Assess", "button")
        assert tab.wait_for("hit_at_5 True", within='[data-testid="pane"]', timeout=30)
        assert not tab.click_text("no such button", "button")
        _not_blank(tab.screenshot(tmp_path / "page.png"))
        with pytest.raises(ui.PageTimeout, match=r"no \['never'\].*it shows: runs"):
            tab.wait_for("never", timeout=1.0)
        assert any("boom" in e for e in tab.errors), tab.errors
        proc = tab.proc
    assert proc.poll() is not None  # the browser is gone
