"""``notebooks/compare_runs.ipynb`` executed headless (nbclient), as CI runs it: parameters from
environment variables, runs of one dataset and split ranked, two runs compared query by query.

The fast test runs it on two tiny run folders written here; the slow one on real
``rag-lab evaluate`` runs of the sample, logged to MLflow (one of them read from MLflow only)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.cli.helpers import rag_lab

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "compare_runs.ipynb"
ENV_KEYS = ("RAG_LAB_RUNS_DIR", "RAG_LAB_TRACKING_URI", "RAG_LAB_DATASET", "RAG_LAB_SPLIT")
ENV_KEYS += ("RAG_LAB_METRIC", "RAG_LAB_RUN_A", "RAG_LAB_RUN_B", "MLFLOW_TRACKING_URI")


def execute(monkeypatch, cwd: Path, **env: str) -> str:
    """Run the notebook with ``env`` (the kernel inherits it); its text output, cell by cell."""
    import nbformat
    from nbclient import NotebookClient

    for k in ENV_KEYS:
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3")
    client.execute(cwd=str(cwd))
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.output_type == "stream":
                out.append(o.text)
            elif "data" in o:
                out.append(o["data"].get("text/plain", ""))
    return "\n".join(out)


def test_the_parameters_cell_is_tagged_for_papermill():
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and "RUNS_DIR" in tagged[0].source and "os.environ" in tagged[0].source
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # stored clean


# -- fast: two tiny pre-made run folders ---------------------------------------------------------


def write_run(folder: Path, split: str, ndcg: dict[str, float], top: dict[str, list[str]]) -> None:
    """A run folder as ``rag-lab evaluate`` writes it, reduced to what the notebook reads."""
    folder.mkdir(parents=True)
    cats = {"q1": "口语", "q2": "exact_code", "q3": "口语", "q4": "exact_code"}
    pq = pd.DataFrame(
        {
            "query_id": list(ndcg),
            "text": [f"query {q}" for q in ndcg],
            "category": [cats[q] for q in ndcg],
            "ndcg_at_10": list(ndcg.values()),
            "hit_rate_at_5": [float(v > 0) for v in ndcg.values()],
            "retrieved_doc_ids": [top[q] for q in ndcg],
        }
    )
    pq.to_parquet(folder / "per_query.parquet")
    metrics = {"ndcg_at_10": float(pq.ndcg_at_10.mean()), "n_queries": len(pq)}
    for cat, group in pq.groupby("category"):
        metrics[f"by_category/{cat}/ndcg_at_10"] = float(group.ndcg_at_10.mean())
    (folder / "metrics.json").write_text(json.dumps(metrics, ensure_ascii=False))
    config = {"dataset": {"name": "toy", "split": split}}
    (folder / "config_resolved.yaml").write_text(yaml.safe_dump(config))


def test_notebook_on_tiny_run_folders(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    docs = {"q1": ["d1", "d2"], "q2": ["d3"], "q3": ["d4", "d1"], "q4": ["d2"]}
    flipped = {q: list(reversed(v)) for q, v in docs.items()}
    write_run(runs / "bm25", "test", {"q1": 0.2, "q2": 1.0, "q3": 0.0, "q4": 0.5}, docs)
    write_run(runs / "hybrid", "test", {"q1": 0.9, "q2": 0.6, "q3": 0.7, "q4": 0.5}, flipped)
    write_run(runs / "dev_run", "dev", {"q1": 1.0, "q2": 1.0, "q3": 1.0, "q4": 1.0}, docs)
    (runs / "report").mkdir()  # a folder with a metrics.json that is not a run is skipped
    (runs / "report" / "metrics.json").write_text("{}")

    text = execute(
        monkeypatch,
        tmp_path,
        RAG_LAB_RUNS_DIR=str(runs),
        RAG_LAB_TRACKING_URI="none",
        RAG_LAB_SPLIT="test",
    )
    assert "MLflow: not read" in text
    assert "2 runs of toy/test ranked on ndcg_at_10 (higher is better); 1 other runs" in text
    assert "A = bm25  B = hybrid  (toy/test, 4 paired queries)" in text  # B: rank 1
    assert "B-A +0.2500" in text and "B better on 2 queries, worse on 1, tied on 1" in text
    better, _, worse = text.partition("queries B gets worse")
    assert "query q1" in better and "query q3" in better and "[d2, d1]" in better
    assert "query q2" in worse and "query q1" not in worse
    assert "口语" in text  # the per-category table keeps Chinese names

    text = execute(  # the pair chosen by name
        monkeypatch,
        tmp_path,
        RAG_LAB_RUNS_DIR=str(runs),
        RAG_LAB_TRACKING_URI="none",
        RAG_LAB_DATASET="toy",
        RAG_LAB_SPLIT="test",
        RAG_LAB_RUN_A="hybrid",
        RAG_LAB_RUN_B="bm25",
    )
    assert "A = hybrid  B = bm25" in text and "B-A -0.2500" in text


def test_notebook_says_what_is_missing(tmp_path, monkeypatch):
    from nbclient.exceptions import CellExecutionError

    runs = tmp_path / "runs"
    write_run(runs / "only", "dev", {"q1": 1.0}, {"q1": ["d1"]})
    with pytest.raises(CellExecutionError, match="need two runs of toy/dev to compare, found 1"):
        execute(monkeypatch, tmp_path, RAG_LAB_RUNS_DIR=str(runs), RAG_LAB_TRACKING_URI="none")


# -- slow: real runs of the sample, MLflow included ----------------------------------------------


@pytest.mark.slow  # two evaluate runs of the sample and a kernel importing MLflow: ~1 min
def test_notebook_on_real_sample_runs(tmp_path, monkeypatch):
    exp = tmp_path / "experiments"
    for name, extra in (
        ("bm25", ["retrievers=[bm25]"]),
        ("hybrid", ["retrievers=[dense,bm25]", "embedder=hashing"]),
    ):
        proc = rag_lab(
            "evaluate", *extra, f"paths.experiments={exp}", f"hydra.run.dir={exp / 'runs' / name}"
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    # one run only in MLflow: the notebook ranks it from the store and downloads its table
    shutil.rmtree(exp / "runs" / "bm25")

    text = execute(monkeypatch, tmp_path, RAG_LAB_RUNS_DIR=str(exp))
    assert f"MLflow: sqlite:///{exp / 'mlflow.db'}" in text
    assert "2 runs of maintenance_kb/test ranked on ndcg_at_10" in text
    assert "paired queries)" in text and "95% CI" in text
    assert "queries B gets better" in text and "queries B gets worse" in text
