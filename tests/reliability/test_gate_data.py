"""The gate checks the data of both sides, not only their fingerprint files (issue 32, item 10).

Before: a toy run with the sample baseline's ``dataset_fingerprint`` copied in passed the gate
against ``baselines/sample`` (9 queries against 107, none in common). Now the per-query tables'
query ids, each query's number of relevant documents and, where both folders have it,
``qrels.trec`` must agree; a mismatch is one line, exit 2."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from rag_lab.evaluate import evaluate
from tests.cli.helpers import cli, error_line
from tests.compose import TOY_OVERRIDES, compose_evaluate

BASELINE = Path(__file__).resolve().parents[2] / "baselines" / "sample"


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    cfg = compose_evaluate(
        [*TOY_OVERRIDES, "retrievers=[bm25]", "tracking=none", "cache.dir=null"],
        tmp_path_factory.mktemp("toy"),
    )
    evaluate(cfg)
    return Path(cfg.paths.output_dir)


def copy_of(folder: Path, to: Path) -> Path:
    shutil.copytree(folder, to)
    return to


def gate(baseline: Path, candidate: Path, *extra: str):
    return cli(
        "gate", "--baseline", str(baseline), "--candidate", str(candidate),
        "--max-drop", "ndcg_at_10=0.5", *extra,
    )  # fmt: skip


def test_a_copied_fingerprint_does_not_pass_against_another_dataset(toy_run, tmp_path):
    cand = copy_of(toy_run, tmp_path / "cand")
    shutil.copy(BASELINE / "dataset_fingerprint", cand / "dataset_fingerprint")
    ran = gate(BASELINE, cand)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    n_base = len(pd.read_parquet(BASELINE / "per_query.parquet"))
    n_toy = len(pd.read_parquet(cand / "per_query.parquet"))
    assert error_line(ran).startswith(
        f"error: refusing to compare: the sides scored different queries (baseline {n_base}, "
        f"candidate {n_toy}, 0 in common; only in the baseline: "
    )


def test_the_same_run_passes(toy_run, tmp_path):
    ran = gate(toy_run, copy_of(toy_run, tmp_path / "cand"))
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_other_relevant_counts_are_refused(toy_run, tmp_path):
    """Same query ids, other judgments: the per-query ``n_relevant`` tells."""
    base = copy_of(toy_run, tmp_path / "base")
    (base / "qrels.trec").unlink()  # as baselines/sample: no qrels.trec, the table decides
    table = pd.read_parquet(base / "per_query.parquet")
    q = sorted(table["query_id"])[0]
    n = int(table.loc[table["query_id"] == q, "n_relevant"].iloc[0])
    table.loc[table["query_id"] == q, "n_relevant"] = n + 1
    table.to_parquet(base / "per_query.parquet", index=False)
    ran = gate(base, toy_run)
    assert ran.returncode == 2
    assert error_line(ran) == (
        f"error: refusing to compare: the sides' judgments differ: 1 of {len(table)} queries "
        f"have another number of relevant documents (e.g. {q}: baseline {n + 1}, candidate "
        f"{n}), whatever their dataset fingerprints say (--allow-fingerprint-mismatch overrides)"
    )


def test_other_qrels_with_the_same_counts_are_refused(toy_run, tmp_path):
    """A judgment moved to another document: counts equal, ``qrels.trec`` differs."""
    base = copy_of(toy_run, tmp_path / "base")
    lines = (base / "qrels.trec").read_text().splitlines()
    qid, zero, _doc, grade = lines[0].split()
    lines[0] = f"{qid} {zero} some-other-document {grade}"
    (base / "qrels.trec").write_text("\n".join(lines) + "\n")
    ran = gate(base, toy_run)
    assert ran.returncode == 2
    assert error_line(ran).startswith(
        "error: refusing to compare: the sides' qrels.trec differ for 1 of "
    )
    assert f"(e.g. {qid})" in error_line(ran)


def test_the_override_compares_with_a_note(toy_run, tmp_path):
    cand = copy_of(toy_run, tmp_path / "cand")
    shutil.copy(BASELINE / "dataset_fingerprint", cand / "dataset_fingerprint")
    ran = gate(BASELINE, cand, "--allow-fingerprint-mismatch")
    assert ran.returncode in (0, 1), ran.stderr
    assert "the sides scored different queries" in ran.stdout + ran.stderr
