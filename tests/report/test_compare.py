"""rag-lab compare on two real toy runs: paired differences equal the metrics.json differences,
better/worse queries partition the changed ones, mismatched data is refused in one line, an
MLflow run id works as a side."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

from rag_lab.analysis.compare import compare
from rag_lab.analysis.runs import load_run, with_labels
from rag_lab.cli.compare import run as compare_cli
from rag_lab.errors import ConfigError
from tests.compose import compose_evaluate
from tests.report.conftest import SCRIPT, Runs


@pytest.fixture(scope="module")
def result(runs: Runs):
    return compare(with_labels(load_run(runs.a)), with_labels(load_run(runs.b)))


def test_differences_match_metrics_json(result, runs: Runs) -> None:
    a = json.loads((runs.a / "metrics.json").read_text())
    b = json.loads((runs.b / "metrics.json").read_text())
    assert result.metric == "ndcg_at_10" and result.rows[0].metric == "ndcg_at_10"
    for row in result.rows:
        # same split, same queries: the paired mean difference is the difference of the means
        assert row.delta == pytest.approx(b[row.metric] - a[row.metric], abs=1e-12)
        assert row.low <= row.delta <= row.high
        assert 0 < row.p_value <= 1
        # the verdict is the randomisation test's, in the metric's direction
        assert (row.better is None) == (row.p_value >= 0.05 or row.delta == 0)


def test_better_and_worse_partition_the_changed_queries(result) -> None:
    assert all(c.b > c.a for c in result.better) and all(c.b < c.a for c in result.worse)
    deltas = [abs(c.delta) for c in result.worse]
    assert deltas == sorted(deltas, reverse=True)
    ids = [c.query_id for c in [*result.better, *result.worse]]
    assert len(ids) == len(set(ids))
    answerable = result.rows[0].n
    assert len(ids) + result.n_unchanged == answerable


def test_cli_console_and_html(runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "cmp.html"
    assert compare_cli([str(runs.a), str(runs.b), "--html", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "ndcg_at_10" in printed and f"html: {out}" in printed
    page = out.read_text(encoding="utf-8")
    assert page.count("<script>") == 1 and SCRIPT not in page
    assert '<section id="worse">' in page and '<section id="better">' in page


def _copy_with(runs: Runs, tmp_path: Path, split: str | None = None, fp: str | None = None):
    other = tmp_path / "other"
    shutil.copytree(runs.b, other)
    if split:
        cfg = yaml.safe_load((other / "config_resolved.yaml").read_text())
        cfg["dataset"]["split"] = split
        (other / "config_resolved.yaml").write_text(yaml.safe_dump(cfg))
    if fp:
        (other / "dataset_fingerprint").write_text(fp)
    return other


@pytest.mark.parametrize(
    "change, message",
    [({"split": "dev"}, "different datasets or splits"), ({"fp": "0" * 32}, "fingerprints")],
)
def test_mismatched_data_is_refused_in_one_line(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture, change: dict, message: str
) -> None:
    other = _copy_with(runs, tmp_path, **change)
    with pytest.raises(ConfigError, match=message):
        compare(load_run(runs.a), load_run(other))
    assert compare_cli([str(runs.a), str(other), "--html", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: refusing to compare") and err.count("\n") == 1
    assert not (tmp_path / "x.html").exists()


def test_unknown_side_is_one_line(runs: Runs, capsys: pytest.CaptureFixture) -> None:
    assert compare_cli([str(runs.a), "no/such/run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no/such/run") and err.count("\n") == 1


def test_mlflow_run_id_as_a_side(runs: Runs, tmp_path: Path) -> None:
    from rag_lab.evaluate import evaluate

    cfg = compose_evaluate([*runs.overrides, "retrievers=[dense,bm25]", "fusion=rrf"], tmp_path)
    evaluate(cfg)
    run_id = (tmp_path / "run" / "mlflow_run_id").read_text().strip()
    side = load_run(run_id, str(cfg.tracking.uri))
    assert side.ref == run_id and side.split == "test" and side.fingerprint
    result = compare(load_run(runs.b), side)
    assert all(math.isclose(r.delta, 0.0, abs_tol=1e-12) for r in result.rows)
    assert result.better == [] and result.worse == []
