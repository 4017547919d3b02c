"""A damaged baseline in ``rag-lab gate`` (issue 13): exit 2 with one line naming the file (a
refusal), never the regression code 1 and never a traceback. Through the real command."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.cli.helpers import cli, error_line


def side(folder: Path) -> Path:
    """A run folder as ``rag-lab evaluate`` writes it (the files the gate reads)."""
    folder.mkdir(parents=True)
    table = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "ndcg_at_10": [1.0, 0.5, 0.0]})
    table.to_parquet(folder / "per_query.parquet", index=False)
    metrics = {"ndcg_at_10": 0.5, "dataset_fingerprint": "fp"}
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def gate(baseline: Path, candidate: Path):
    return cli(
        "gate",
        "--baseline",
        str(baseline),
        "--candidate",
        str(candidate),
        "--max-drop",
        "ndcg_at_10=0.01",
    )


def test_intact_sides_pass(tmp_path):
    proc = gate(side(tmp_path / "base"), side(tmp_path / "cand"))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(p.read_bytes()[:200]),  # truncated (a killed copy)
        lambda p: p.write_bytes(b"not a parquet file at all"),  # garbage
    ],
    ids=["truncated", "garbage"],
)
def test_corrupt_baseline_per_query_table_is_a_refusal_naming_it(tmp_path, damage):
    """Before: pyarrow's ArrowInvalid traceback, exit 1 (the regression code)."""
    base = side(tmp_path / "base")
    damage(base / "per_query.parquet")
    proc = gate(base, side(tmp_path / "cand"))
    assert proc.returncode == 2, proc.stderr
    assert error_line(proc).startswith(
        f"error: {base / 'per_query.parquet'}: cannot read the per-query table (ArrowInvalid: "
    )


@pytest.mark.parametrize(
    "content, why",
    [
        (b'{"ndcg_at_10": 0.5,', "JSONDecodeError"),  # truncated; refused before this change too
        (b"\xff\xfe{garbage", "UnicodeDecodeError"),  # before: a traceback, exit 1
    ],
)
def test_corrupt_baseline_metrics_json_is_a_refusal_naming_it(tmp_path, content, why):
    base = side(tmp_path / "base")
    (base / "metrics.json").write_bytes(content)
    proc = gate(base, side(tmp_path / "cand"))
    assert proc.returncode == 2, proc.stderr
    assert error_line(proc).startswith(
        f"error: {base / 'metrics.json'}: cannot read metrics ({why}"
    )
