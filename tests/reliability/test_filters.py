"""Issue 32, item 12: a metadata filter that matches nothing for a query no longer lets every
chunk through unannounced: ``on_empty`` (keep | empty | fail) says what happens, and each such
query is counted (metrics.json) and flagged (per_query.parquet)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rag_lab.evaluate import evaluate
from tests.compose import TOY, TOY_OVERRIDES, compose_evaluate

# q1..q3 of the toy set ask about manuals; doc_type=release_note matches none of their chunks
FILTER = [
    "retrievers=[bm25]",
    "tracking=none",
    "postprocess=[metadata_filter]",
    "+postprocess.metadata_filter.equals.source_type=release_note",
]


def _run(tmp_path: Path, on_empty: str) -> tuple[dict[str, float], pd.DataFrame]:
    cfg = compose_evaluate(
        [*TOY_OVERRIDES, *FILTER, f"postprocess.metadata_filter.on_empty={on_empty}"], tmp_path
    )
    evaluate(cfg)
    out = Path(cfg.paths.output_dir)
    return json.loads((out / "metrics.json").read_text()), pd.read_parquet(
        out / "per_query.parquet"
    )


@pytest.mark.parametrize("on_empty", ["keep", "empty"])
def test_a_filter_that_matches_nothing_is_counted_per_query(tmp_path, on_empty):
    metrics, table = _run(tmp_path / on_empty, on_empty)
    n = int(metrics["n_queries"])
    assert metrics["metadata_filter/emptied_queries"] == n
    assert metrics["filter_empty/n_flagged"] == n
    assert set(table["filter_empty"]) == {json.dumps(on_empty)}
    if on_empty == "keep":  # before: this, silently
        assert metrics["hit_rate_at_10"] > 0
    else:
        assert metrics["hit_rate_at_10"] == 0 and metrics["wrong_refusal_rate"] == 1


def test_on_empty_fail_is_one_line_naming_the_query(tmp_path):
    from tests.cli.helpers import cli, error_line

    out = cli(
        "evaluate",
        "dataset=beir",
        f"dataset.path={TOY}",
        "embedder=hashing",
        *FILTER,
        "postprocess.metadata_filter.on_empty=fail",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"paths.experiments={tmp_path / 'exp'}",
    )
    assert out.returncode == 2, out.stderr[-2000:]
    line = error_line(out)  # one line, no traceback
    assert "on_empty=fail" in line and "the filter removes all" in line
