"""The noise-ratio loophole on a real tokenizer mismatch: the sample dataset's Chinese queries with
the English analyser (no segmentation: whole CJK runs are single terms, so many queries match
nothing) against jieba. Noise alone prefers the broken analyser; ``empty_result_rate``, hit rate
and the objective / gate rule expose it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rag_lab.cli.gate import run as gate_cli
from rag_lab.evaluate import evaluate
from rag_lab.metrics.names import objective_value
from rag_lab.paths import PACKAGE_DIR
from tests.compose import compose_evaluate

SAMPLE = Path(PACKAGE_DIR) / "sample" / "maintenance_kb"
CJK = re.compile(r"[\u4e00-\u9fff]")


def chinese_split(root: Path) -> Path:
    """The sample's test queries written in Chinese, as a BEIR folder (split ``dev``, so a sweep
    may select on it), with the sample's corpus."""
    shutil.copytree(SAMPLE / "docs", root / "docs")
    lines = (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    queries = {json.loads(line)["_id"]: line for line in lines if line.strip()}
    rows = (SAMPLE / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    keep = {
        r.split("\t")[0]
        for r in rows[1:]
        if CJK.search(json.loads(queries[r.split("\t")[0]])["text"])
    }
    (root / "qrels").mkdir()
    (root / "qrels" / "dev.tsv").write_text(
        "\n".join([rows[0], *(r for r in rows[1:] if r.split("\t")[0] in keep)]) + "\n"
    )
    (root / "queries.jsonl").write_text("\n".join(queries[q] for q in sorted(keep)) + "\n")
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("loophole")
    data = chinese_split(root / "zh")
    out = {}
    for tokenizer in ("english", "jieba"):
        cfg = compose_evaluate(
            [
                "dataset=sample",
                f"dataset.path={data}",
                "dataset.split=dev",
                "retrievers=[bm25]",
                f"tokenizer={tokenizer}",
                "parser.parsers.pdf.ocr=off",  # fast: the scanned page is not the point here
                "tracking=none",
            ],
            root / tokenizer,
        )
        evaluate(cfg)
        out[tokenizer] = Path(cfg.paths.output_dir)
    return out


def metrics(folder: Path) -> dict:
    return json.loads((folder / "metrics.json").read_text())


def test_noise_alone_prefers_the_broken_tokenizer_and_coverage_exposes_it(runs):
    en, jb = metrics(runs["english"]), metrics(runs["jieba"])
    assert en["n_queries"] == jb["n_queries"] >= 40
    # the loophole: fewer noisy documents because many queries retrieve nothing at all
    assert en["noise_ratio_at_5"] < jb["noise_ratio_at_5"] - 0.05
    assert en["empty_result_rate"] > 0.1 and jb["empty_result_rate"] == 0
    assert en["mean_retrieved_at_5"] < jb["mean_retrieved_at_5"]
    # those queries count as misses: hit rate and recall prefer jieba
    assert en["hit_rate_at_5"] < jb["hit_rate_at_5"]
    assert en["recall_at_10"] < jb["recall_at_10"]
    # as an objective, noise alone picks english; with a hit-rate floor only jieba meets it
    assert objective_value(en, "noise_ratio@5") < objective_value(jb, "noise_ratio@5")
    floor = {"hit_rate@5": jb["hit_rate_at_5"]}
    assert objective_value(jb, "noise_ratio@5", floor) < objective_value(en, "noise_ratio@5", floor)


def test_the_gate_refuses_noise_alone_and_catches_the_broken_tokenizer(runs, capsys):
    base, cand = str(runs["jieba"]), str(runs["english"])
    sides = ["--baseline", base, "--candidate", cand]
    # noise alone would pass the broken tokenizer (noise fell): refused, with what to add
    assert gate_cli([*sides, "--max-rise", "noise_ratio_at_5=0.02"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--max-drop hit_rate_at_5=0.02" in err
    # paired with a hit-rate (or recall) floor, the gate fails it
    code = gate_cli(
        [
            *sides,
            "--max-rise",
            "noise_ratio@5=0.02",
            "--max-drop",
            "recall@10=0.02",
            "--max-drop",
            "hit_rate@5=0.02",
            "--no-significance",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    (empty,) = [ln for ln in out.splitlines() if ln.startswith("| empty_result_rate |")]
    assert empty.endswith("| info (worse) |") and float(empty.split("|")[6]) < 0.05  # p, per query
    fail_rows = [ln for ln in out.splitlines() if ln.endswith("**FAIL** |")]
    assert {ln.split("|")[1].strip() for ln in fail_rows} == {"hit_rate_at_5", "recall_at_10"}


def sweep(tmp_path: Path, data: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "rag_lab.cli",
        "evaluate",
        "-m",
        "dataset=sample",
        f"dataset.path={data}",
        "dataset.split=dev",
        "retrievers=[bm25]",
        "tokenizer=english,jieba",
        "parser.parsers.pdf.ocr=off",
        "tracking=none",
        "sweep.report_winner=false",
        "optimized_metric=noise_ratio@5",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"paths.experiments={tmp_path / 'exp'}",
        *args,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.slow
def test_a_noise_objective_needs_a_floor_and_then_the_floor_picks_jieba(tmp_path):
    data = chinese_split(tmp_path / "zh")
    refused = sweep(tmp_path / "alone", data)
    assert refused.returncode == 2
    (line,) = [ln for ln in refused.stderr.splitlines() if ln.startswith("error: ")]
    assert "optimized_metric=noise_ratio@5" in line and "+sweep.floors.hit_rate_at_5=" in line
    assert not (tmp_path / "alone" / "sweep" / "0" / "metrics.json").exists()
    floored = sweep(tmp_path / "floor", data, "+sweep.floors.hit_rate_at_5=0.8")
    assert floored.returncode == 0, floored.stderr[-3000:]
    sdir = tmp_path / "floor" / "sweep"
    winner = json.loads((sdir / "winner.json").read_text())
    assert winner["overrides"]["tokenizer"] == "jieba"
    # noise alone would have picked english: it is lower there
    en, jb = (metrics(sdir / j) for j in ("0", "1"))
    assert en["noise_ratio_at_5"] < jb["noise_ratio_at_5"] and en["hit_rate_at_5"] < 0.8


def test_inside_a_sweep_a_noise_objective_without_a_floor_is_refused(monkeypatch, tmp_path):
    import rag_lab.sweep.context as context
    from rag_lab.errors import ConfigError

    def cfg(*extra: str):
        return compose_evaluate(["optimized_metric=noise_ratio@10", *extra], tmp_path)

    context.check_objective(cfg())  # a single run: nothing is selected on it
    monkeypatch.setattr(context, "sweep_context", lambda: {"job": 0})
    with pytest.raises(ConfigError, match=r"add a hit-rate or recall floor.*hit_rate_at_10=0.8$"):
        context.check_objective(cfg())
    with pytest.raises(ConfigError, match="add a hit-rate or recall floor"):  # nDCG is not one
        context.check_objective(cfg("+sweep.floors.ndcg_at_10=0.5"))
    context.check_objective(cfg("+sweep.floors.recall_at_100=0.9"))
    context.check_objective(cfg("+sweep.floors.hit_rate_at_5=0.8"))
    context.check_objective(cfg("optimized_metric=ndcg@10"))
    with pytest.raises(ConfigError, match="sweep.floors.hit_rate_at_5: expected a number"):
        context.check_objective(cfg("+sweep.floors.hit_rate_at_5=high"))
    assert context.sweep_floors(cfg("+sweep.floors.hit_rate_at_5=0.8")) == {"hit_rate_at_5": 0.8}
