"""``rag-lab gate``: run folders, metrics.json paths and MLflow run ids; tolerance, significance,
fingerprint refusal, reports and exit codes (in-process and through the real command)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rag_lab.analysis.gate import GateError, gate, render_markdown, resolve_side
from rag_lab.cli.gate import run
from rag_lab.evaluate import evaluate
from rag_lab.metrics.names import HEADLINE
from tests.cli.helpers import cli
from tests.compose import TOY_OVERRIDES, compose_evaluate

# .ci/run's checks: a noise ratio is gated only together with a hit-rate (or recall) floor
CHECKS = [
    "--max-drop",
    "ndcg_at_10=0.01",
    "--max-drop",
    "hit_rate_at_5=0.02",
    "--max-rise",
    "noise_ratio_at_5=0.02",
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path | str]:
    """Three toy runs: ``base`` (BM25, logged to MLflow), ``same`` (identical, no MLflow) and
    ``worse`` (8-dimensional hashing dense retriever: nDCG@10 falls from ~0.98 to ~0.58)."""
    root = tmp_path_factory.mktemp("gate_runs")
    out: dict[str, Path | str] = {}
    for name, extra in [
        ("base", ["retrievers=[bm25]"]),
        ("same", ["retrievers=[bm25]", "tracking=none"]),
        ("worse", ["retrievers=[dense]", "embedder.dimension=8", "tracking=none"]),
    ]:
        cfg = compose_evaluate([*TOY_OVERRIDES, *extra], root / name)
        evaluate(cfg)
        out[name] = Path(cfg.paths.output_dir)
        if name == "base":
            out["uri"] = str(cfg.tracking.uri)
    out["run_id"] = (Path(out["base"]) / "mlflow_run_id").read_text().strip()
    return out


def synthetic(folder: Path, scores: np.ndarray, fingerprint: str = "synthetic-fp") -> Path:
    """An export-style folder: metrics.json (with a ``dataset_fingerprint`` key) and
    per_query.parquet."""
    folder.mkdir(parents=True)
    ids = [f"q{i}" for i in range(scores.size)]
    table = pd.DataFrame({"query_id": ids, "ndcg_at_10": scores})
    table.to_parquet(folder / "per_query.parquet", index=False)
    metrics = {"ndcg_at_10": float(scores.mean()), "dataset_fingerprint": fingerprint}
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


@pytest.fixture
def noisy_pair(tmp_path):
    """200 queries; ``tiny``: a mean drop of 0.005 under +-0.1 per-query noise (not significant);
    ``big``: a drop of 0.05 under the same noise (significant)."""
    rng = np.random.default_rng(7)
    base = rng.uniform(0.3, 0.7, 200)
    signs = np.where(np.arange(200) % 2 == 0, 1.0, -1.0)
    return {
        "base": synthetic(tmp_path / "base", base),
        "tiny": synthetic(tmp_path / "tiny", base + 0.1 * signs - 0.005),
        "big": synthetic(tmp_path / "big", base + 0.1 * signs - 0.05),
    }


def copy_with_fingerprint(src: Path, dst: Path, fingerprint: str | None) -> Path:
    shutil.copytree(src, dst)
    if fingerprint is None:
        (dst / "dataset_fingerprint").unlink()
    else:
        (dst / "dataset_fingerprint").write_text(fingerprint)
    return dst


def test_identical_runs_pass(runs):
    drops = {"ndcg_at_10": 0.01, "hit_rate_at_5": 0.02}
    result = gate(runs["base"], runs["same"], drops, {"noise_ratio_at_5": 0.02})
    assert result.exit_code == 0
    statuses = {(r.metric, r.status) for r in result.rows}
    checked = ("ndcg_at_10", "hit_rate_at_5", "noise_ratio_at_5")
    assert {(m, "pass") for m in checked} <= statuses
    # the other headline metrics (the one list, rag_lab.metrics.names) are listed, not checked
    info = [r.metric for r in result.rows if r.status == "info"]
    assert info == [m for m in HEADLINE if m not in checked]
    summary = render_markdown(result)
    assert "| recall_at_100 |" in summary and "info (same)" in summary
    ndcg = next(r for r in result.rows if r.metric == "ndcg_at_10")
    assert ndcg.delta == 0 and ndcg.p_value == 1.0


def test_degraded_pipeline_fails_on_tolerance(runs, capsys):
    code = run(
        [
            "--baseline",
            str(runs["base"]),
            "--candidate",
            str(runs["worse"]),
            "--max-drop",
            "ndcg_at_10=0.01",
            "--no-significance",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "**Verdict: FAIL**" in out and "| ndcg_at_10 |" in out and "--no-significance" in out


def test_tiny_drop_within_noise_warns_and_big_drop_fails(noisy_pair, capsys):
    tiny = gate(noisy_pair["base"], noisy_pair["tiny"], {"ndcg_at_10": 0.001}, {})
    (row,) = tiny.checked
    assert row.delta == pytest.approx(-0.005) and row.p_value >= 0.05
    assert row.status == "warn" and tiny.exit_code == 0
    # the same drop fails when significance is switched off
    strict = gate(
        noisy_pair["base"], noisy_pair["tiny"], {"ndcg_at_10": 0.001}, {}, significance=False
    )
    assert strict.exit_code == 1
    big = gate(noisy_pair["base"], noisy_pair["big"], {"ndcg_at_10": 0.001}, {})
    (row,) = big.checked
    assert row.p_value < 0.05 and row.status == "fail" and big.exit_code == 1
    assert (
        run(
            [
                "--baseline",
                str(noisy_pair["base"]),
                "--candidate",
                str(noisy_pair["tiny"] / "metrics.json"),
                "--max-drop",
                "ndcg_at_10=0.001",
            ]
        )
        == 0
    )
    assert "within noise" in capsys.readouterr().out


def test_fingerprint_mismatch_refused(runs, tmp_path, capsys):
    other = copy_with_fingerprint(runs["same"], tmp_path / "other", "0123456789abcdef")
    with pytest.raises(GateError, match="fingerprints differ"):
        gate(runs["base"], other, {"ndcg_at_10": 0.01}, {})
    assert run(["--baseline", str(runs["base"]), "--candidate", str(other), *CHECKS]) == 2
    err = capsys.readouterr().err
    base_fp = (runs["base"] / "dataset_fingerprint").read_text()
    assert err.startswith("error: refusing to compare")
    assert base_fp in err and "0123456789abcdef" in err
    allowed = gate(runs["base"], other, {"ndcg_at_10": 0.01}, {}, allow_fingerprint_mismatch=True)
    assert allowed.exit_code == 0 and allowed.fingerprint_note
    missing = copy_with_fingerprint(runs["same"], tmp_path / "missing", None)
    with pytest.raises(GateError, match="missing on one side"):
        gate(runs["base"], missing, {"ndcg_at_10": 0.01}, {})


def test_junit_and_summary_files(runs, tmp_path, capsys):
    junit, summary = tmp_path / "reports" / "gate.xml", tmp_path / "reports" / "gate.md"
    code = run(
        [
            "--baseline",
            str(runs["base"]),
            "--candidate",
            str(runs["worse"]),
            "--max-drop",
            "ndcg_at_10=0.01",
            "--max-drop",
            "hit_rate_at_5=1",
            "--max-rise",
            "noise_ratio_at_5=0.5",
            "--no-significance",
            "--junit",
            str(junit),
            "--summary",
            str(summary),
        ]
    )
    assert code == 1
    assert summary.read_text() == capsys.readouterr().out
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and len(cases) == 3
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["ndcg_at_10 (max-drop)"]


def test_unknown_metric_and_unresolvable_side(runs, tmp_path):
    with pytest.raises(GateError, match="'ndcg_at_11' not in the baseline"):
        gate(runs["base"], runs["same"], {"ndcg_at_11": 0.01}, {})
    (tmp_path / "empty").mkdir()
    with pytest.raises(GateError, match="no metrics.json"):
        resolve_side(tmp_path / "empty")
    with pytest.raises(GateError, match="not an MLflow run id"):
        resolve_side(tmp_path / "nope")


def test_mlflow_run_id(runs, tmp_path):
    side = resolve_side(str(runs["run_id"]), str(runs["uri"]))
    assert side.fingerprint == (runs["base"] / "dataset_fingerprint").read_text()
    assert side.per_query is not None and len(side.per_query) == 8
    result = gate(
        str(runs["run_id"]), runs["same"], {"ndcg_at_10": 0.01}, {}, tracking_uri=str(runs["uri"])
    )
    assert result.exit_code == 0 and result.baseline.ref == runs["run_id"]
    with pytest.raises(GateError, match="not found"):
        resolve_side("0" * 32, str(runs["uri"]))
    with pytest.raises(GateError, match="no MLflow store"):
        resolve_side("0" * 32, f"sqlite:///{tmp_path / 'absent.db'}")
    assert not (tmp_path / "absent.db").exists()


def test_cli_exit_codes(runs, tmp_path):
    other = copy_with_fingerprint(runs["same"], tmp_path / "other", "0123456789abcdef")
    cases = [
        ([str(runs["same"])], 0),
        ([str(runs["worse"]), "--no-significance"], 1),
        ([str(other)], 2),
        ([str(tmp_path / "nope")], 2),
    ]
    for (candidate, *extra), expected in cases:
        proc = cli(
            "gate", "--baseline", str(runs["base"]), "--candidate", candidate, *CHECKS, *extra
        )
        assert proc.returncode == expected, (candidate, proc.stdout, proc.stderr)
        if expected == 2:
            assert proc.stderr.startswith("error: ") and len(proc.stderr.strip().splitlines()) == 1
    bad = cli(
        "gate",
        "--baseline",
        str(runs["base"]),
        "--candidate",
        str(runs["same"]),
        "--max-drop",
        "ndcg_at_10",
    )
    assert bad.returncode == 2 and "METRIC=TOLERANCE" in bad.stderr


def test_info_rows_say_which_way_a_metric_moved(runs):
    """Unchecked headline rows are marked better/worse by the metric's direction
    (``higher_is_better``): nDCG falling and noise rising are both worse."""
    result = gate(runs["base"], runs["worse"], {}, {})
    assert not result.checked and result.exit_code == 0
    table = render_markdown(result)
    rows = {r.metric: r for r in result.rows}
    assert rows["ndcg_at_10"].delta < 0 and rows["noise_ratio_at_5"].delta > 0
    for metric in ("ndcg_at_10", "noise_ratio_at_5"):
        (line,) = [ln for ln in table.splitlines() if ln.startswith(f"| {metric} |")]
        assert line.endswith("| info (worse) |"), line


def test_an_export_side_is_verified_against_its_manifest(runs, tmp_path):
    from rag_lab.export import export_pipeline

    export = export_pipeline(Path(runs["same"]), tmp_path / "export")
    assert run(["--baseline", str(runs["base"]), "--candidate", str(export), *CHECKS]) == 0
    metrics = json.loads((export / "metrics.json").read_text())
    metrics["ndcg_at_10"] = 1.0  # an edited export: its numbers are not what was measured
    (export / "metrics.json").write_text(json.dumps(metrics))
    proc = cli("gate", "--baseline", str(runs["base"]), "--candidate", str(export), *CHECKS)
    assert proc.returncode == 2
    assert "metrics.json differs from its sha256 in manifest.json" in proc.stderr
    args = ["--baseline", str(runs["base"]), "--candidate", str(export), *CHECKS, "--no-verify"]
    assert run(args) == 0


def test_config_metric_names_are_accepted(runs):
    """``ndcg@10`` (the name evaluate.yaml uses) checks the same metric as ``ndcg_at_10``."""
    same = [str(runs["base"]), str(runs["same"])]
    at = ["--max-drop", "ndcg@10=0.01", "--max-drop", "hit_rate@5=0.02"]
    at += ["--max-rise", "noise_ratio@5=0.02"]
    assert run(["--baseline", same[0], "--candidate", same[1], *at]) == 0
    assert (
        run(["--baseline", same[0], "--candidate", str(runs["worse"]), *at, "--no-significance"])
        == 1
    )
    twice = ["--max-drop", "ndcg@10=0.01", "--max-drop", "ndcg_at_10=0.02"]
    assert run(["--baseline", same[0], "--candidate", same[1], *twice]) == 2
