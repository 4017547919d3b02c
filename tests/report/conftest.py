"""Two real runs of the toy dataset for the report tests (hashing embedder: no model), on a copy
whose corpus and queries carry markup, as an untrusted corpus may: BM25 alone (A) and hybrid
dense + BM25 with RRF (B). Neither is tracked (MLflow costs ~10 s here); test_compare tracks one
of its own for the run-id side."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.compose import TOY, TOY_OVERRIDES, compose_evaluate

SCRIPT = '<script>alert("pwned")</script>'
IMG = "<img src=x onerror=alert(1)>"


@dataclass(frozen=True)
class Runs:
    a: Path
    b: Path
    data: Path
    overrides: tuple[str, ...]  # what composed them, with the copy's path


def hostile_copy(dest: Path) -> Path:
    """The toy dataset with ``SCRIPT`` in document d2 and ``IMG`` in query q2."""
    shutil.copytree(TOY, dest)
    lines = []
    for line in (dest / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        if doc["_id"] == "d2":
            doc["text"] += f" {SCRIPT} </details></div>"
        lines.append(json.dumps(doc, ensure_ascii=False))
    (dest / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = []
    for line in (dest / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        query = json.loads(line)
        if query["_id"] == "q2":
            query["text"] += f" {IMG}"
        lines.append(json.dumps(query, ensure_ascii=False))
    (dest / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    from rag_lab.evaluate import evaluate

    root = tmp_path_factory.mktemp("report_runs")
    data = hostile_copy(root / "toy")
    base = [o for o in TOY_OVERRIDES if not o.startswith("dataset.path=")]
    base += [f"dataset.path={data}"]
    cfg_a = compose_evaluate([*base, "retrievers=[bm25]", "tracking=none"], root / "a")
    cfg_b = compose_evaluate(
        [*base, "retrievers=[dense,bm25]", "fusion=rrf", "tracking=none"], root / "b"
    )
    evaluate(cfg_a)
    evaluate(cfg_b)
    return Runs(root / "a" / "run", root / "b" / "run", data, tuple(base))


@pytest.fixture(scope="session")
def sweep(runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep folder as Hydra and the callback leave it, from the two runs: job 0 = A, job 1 =
    B, each with its ``.hydra/overrides.yaml``; ``multirun.yaml`` names the objective."""
    import yaml

    root = tmp_path_factory.mktemp("report_sweep")
    jobs = {
        "0": (runs.a, ["retrievers=[bm25]", "fusion.k=60", "dataset.split=test"]),
        "1": (runs.b, ["retrievers=[dense,bm25]", "fusion.k=10", "dataset.split=test"]),
    }
    for name, (run, overrides) in jobs.items():
        shutil.copytree(run, root / name)
        (root / name / "report.html").unlink(missing_ok=True)
        (root / name / ".hydra").mkdir()
        (root / name / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (root / "multirun.yaml").write_text(yaml.safe_dump({"optimized_metric": "ndcg@10"}))
    return root
