"""The walk's waterfall and page: one bar per step (and the final state), coloured by the decision,
the CIs on the page, and the page in headless Chromium; then a real walk of shipped steps on the
toy dataset through the CLI."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml

from rag_lab.analysis.walk import decide, load_plan, read_result
from rag_lab.cli.walk import run as walk_cli
from rag_lab.errors import ConfigError
from rag_lab.paths import CONFIG_DIR
from rag_lab.report.waterfall import waterfall_svg, write_walk_report, write_waterfall_svg
from tests.compose import TOY_OVERRIDES
from tests.report.test_chromium import BROWSER, chromium

SVG = "{http://www.w3.org/2000/svg}"


def bars(svg: str) -> list[tuple[str, str]]:
    root = ET.fromstring(svg)
    return [(g.get("data-step"), g.get("data-kind")) for g in root.iter(f"{SVG}g")]


def test_one_bar_per_step_coloured_by_the_decision(walked):
    result, _, _ = walked
    svg = waterfall_svg(result)
    assert bars(svg) == [
        ("base", "total"),
        ("good", "up"),
        ("bad_on_dev", "dropped"),
        ("model", "skipped"),
        ("ndcg_only", "up"),  # kept on dev's nDCG; test hit rate unchanged: a flat "up" bar
        ("nothing", "dropped"),
        ("final", "total"),
    ]
    assert len(re.findall(r'<rect class="bar ', svg)) == len(result.steps) + 1
    # a whisker per step that ran (its paired CI), none for states or the skipped step
    assert svg.count('class="ci"') == 4
    # lower is better for noise: the step that adds hits is drawn as a gain
    noise = bars(waterfall_svg(result, "noise_ratio@5"))
    assert noise[1] == ("good", "up")


def test_a_metric_the_walk_did_not_measure_is_one_line(walked):
    result, _, _ = walked
    with pytest.raises(ConfigError, match=r"no 'mrr@10' on test \(measured: hit_rate_at_5, "):
        waterfall_svg(result, "mrr@10")


def test_final_bar_is_the_last_kept_state(walked):
    result, _, _ = walked
    svg = waterfall_svg(result)
    last_kept = [s for s in result.steps if s.kept][-1]
    assert last_kept.name == "ndcg_only"
    final = last_kept.means["test"]["hit_rate_at_5"]
    assert f">{final:.3f}</text>" in svg.rsplit('data-step="final"', 1)[1]


def test_page_has_the_decisions_and_cis(walked, tmp_path):
    result, _, _ = walked
    page = write_walk_report(result, tmp_path).read_text(encoding="utf-8")
    for text in ("kept", "dropped", "skipped (needs x.model=...)", "p=", "ndcg_at_10"):
        assert text in page
    d = result.steps[1].diffs["dev"]["hit_rate_at_5"]
    assert f"[{d.low:.4f}, {d.high:.4f}]" in page
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="waterfall"') == len(
        result.plan.metrics
    )
    svg = write_waterfall_svg(result, tmp_path / "docs" / "w.svg").read_text(encoding="utf-8")
    assert svg.startswith("<?xml") and ET.fromstring(svg.split("\n", 1)[1]) is not None


@pytest.mark.skipif(BROWSER is None, reason="no Chromium on PATH")
def test_page_renders_in_chromium(walked, tmp_path):
    result, _, _ = walked
    path = write_walk_report(result, tmp_path)
    shot = tmp_path / "walk.png"
    proc = chromium(f"--screenshot={shot}", "--window-size=1280,1600", path.resolve().as_uri())
    assert shot.is_file(), proc.stderr[-2000:]
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float64)
    assert pixels.std() > 20  # not a blank page
    dom = chromium("--dump-dom", path.resolve().as_uri())
    assert dom.returncode == 0 and 'data-ready="1"' in dom.stdout
    assert "Uncaught" not in dom.stderr
    per_figure = len(result.steps) + 1
    assert len(re.findall(r'<rect class="bar ', dom.stdout)) == per_figure * len(
        result.plan.metrics
    )


def test_a_real_walk_of_shipped_steps_on_the_toy_dataset(tmp_path, monkeypatch):
    """Two of the shipped steps (hybrid BM25, really evaluated with the hashing embedder on the
    toy BEIR set; the cross-encoder, skipped without a model) through the command: walk.json,
    run folders, report.html with a bar per step, and decisions that follow dev's numbers."""
    shipped = Path(CONFIG_DIR) / "walk" / "tutorial_to_production.yaml"
    plan = load_plan(shipped)
    raw = yaml.safe_load(shipped.read_text(encoding="utf-8"))
    raw["steps"] = [s for s in raw["steps"] if s["name"] in ("hybrid_bm25", "cross_encoder")]
    raw["steps"][-1].pop("train")  # without a way to train it, the step says what it needs
    raw["ci"]["n_resamples"] = 200
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump(raw), encoding="utf-8")
    monkeypatch.setenv("RAG_LAB_EXPERIMENTS", str(tmp_path / "experiments"))
    out = tmp_path / "walk"
    overrides = [*TOY_OVERRIDES, "tracking=none", "progress=false", "evaluation.latency_queries=2"]
    assert walk_cli(["--walk", str(small), "--out", str(out), *overrides]) == 0
    result = read_result(out)
    assert [(s.name, s.skipped) for s in result.steps] == [
        ("base", ""),
        ("hybrid_bm25", ""),
        ("cross_encoder", "needs postprocess.cross_encoder.model=..."),
    ]
    hybrid = result.steps[1]
    step = next(s for s in plan.steps if s.name == "hybrid_bm25")
    assert (hybrid.kept, hybrid.decided_by) == decide(
        hybrid.diffs["dev"], plan.decision_metrics(step), plan.min_gain
    )
    assert "retrievers=[dense,bm25]" in hybrid.overrides and "embedder=hashing" in hybrid.overrides
    for split in ("dev", "test"):
        assert (out / split / "01_hybrid_bm25" / "per_query.parquet").is_file()
        d = hybrid.diffs[split]["hit_rate_at_5"]
        assert d.low <= d.mean <= d.high
    page = (out / "report.html").read_text(encoding="utf-8")
    assert len(re.findall(r'<rect class="bar ', page)) == 4 * len(plan.metrics)


def test_the_walk_in_two_worker_processes_is_the_sequential_walk(tmp_path, monkeypatch):
    """rag-lab walk's default (a step's splits in two forked workers, sharing one stage cache)
    against --workers 1 on the toy set: the same decisions and the same numbers; each worker's
    console summary in its run folder."""
    shipped = Path(CONFIG_DIR) / "walk" / "tutorial_to_production.yaml"
    raw = yaml.safe_load(shipped.read_text(encoding="utf-8"))
    raw["steps"] = [s for s in raw["steps"] if s["name"] in ("hybrid_bm25", "as_of_filter")]
    raw["ci"]["n_resamples"] = 200
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump(raw), encoding="utf-8")
    overrides = [*TOY_OVERRIDES, "tracking=none", "progress=false", "evaluation.latency_queries=0"]
    results = {}
    for workers in ("1", "2"):
        monkeypatch.setenv("RAG_LAB_EXPERIMENTS", str(tmp_path / f"experiments{workers}"))
        out = tmp_path / f"walk{workers}"
        args = ["--walk", str(small), "--out", str(out), "--workers", workers, *overrides]
        assert walk_cli(args) == 0
        results[workers] = read_result(out)
    one, two = results["1"], results["2"]
    assert [(s.name, s.kept, s.decided_by, s.skipped) for s in two.steps] == [
        (s.name, s.kept, s.decided_by, s.skipped) for s in one.steps
    ]
    assert [s.means for s in two.steps] == [s.means for s in one.steps]
    assert "hit_rate" in (tmp_path / "walk2" / "test" / "00_base" / "console.txt").read_text()


@pytest.mark.slow
def test_the_shipped_walk_on_the_sample_dataset(tmp_path, monkeypatch):
    """The shipped walk's first and metadata steps on the sample dataset itself (hashing
    embedder): the contract is kept as a prerequisite, the as-of filter is decided on dev's
    numbers, and the page has a bar per step."""
    shipped = Path(CONFIG_DIR) / "walk" / "tutorial_to_production.yaml"
    plan = load_plan(shipped)
    raw = yaml.safe_load(shipped.read_text(encoding="utf-8"))
    raw["steps"] = [s for s in raw["steps"] if s["name"] in ("metadata_contract", "as_of_filter")]
    small = tmp_path / "sample.yaml"
    small.write_text(yaml.safe_dump(raw), encoding="utf-8")
    monkeypatch.setenv("RAG_LAB_EXPERIMENTS", str(tmp_path / "experiments"))
    out = tmp_path / "walk"
    overrides = ["embedder=hashing", "tracking=none", "progress=false"]
    assert walk_cli(["--walk", str(small), "--out", str(out), *overrides]) == 0
    result = read_result(out)
    base, contract, as_of = result.steps
    assert base.means["test"] and contract.decided_by == "always" and contract.kept
    step = next(s for s in plan.steps if s.name == "as_of_filter")
    assert (as_of.kept, as_of.decided_by) == decide(
        as_of.diffs["dev"], plan.decision_metrics(step), plan.min_gain
    )
    assert "version_as_of" in as_of.by_category["test"]  # the sample's categories
    page = (out / "report.html").read_text(encoding="utf-8")
    assert len(re.findall(r'<rect class="bar ', page)) == 4 * len(plan.metrics)
