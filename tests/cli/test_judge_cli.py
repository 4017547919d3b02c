"""``rag-lab judge`` as a user runs it (a fresh interpreter): scores, means, the ragas judge and its
cache; a malformed line → exit 2 naming it (in process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.helpers import Ran, cli

ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}
CTX = ["Fault E102 means low oil pressure.", "Replace the seal every 3000 h."]
GOOD = [
    {
        "id": "a",
        "query": "What does E102 mean?",
        "retrieved_contexts": CTX,
        "response": "Fault E102 means low oil pressure.",
        "reference": "low oil pressure",
    },
    {
        "query": "What does E120 mean?",
        "retrieved_contexts": CTX,
        "response": "Fault E120 means low oil pressure.",
    },
    {
        "query": "Who made it?",
        "retrieved_contexts": CTX,
        "response": "I cannot tell from the provided context.",
    },
    {"query": "E102?", "retrieved_contexts": CTX, "response": ""},
]


def judge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rag_lab.cli", "judge", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )


def judge_here(*args: str) -> Ran:
    """``rag-lab judge`` in this process: for refusals, where a fresh interpreter proves nothing
    more than the exit status and the message."""
    return cli("judge", *args)


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_scores_each_line_and_prints_means(tmp_path):
    src = write(tmp_path / "logs.jsonl", [json.dumps(r) for r in GOOD])
    out = tmp_path / "scores.jsonl"
    proc = judge("--input", str(src), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(ln) for ln in out.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3, 4] and rows[0]["id"] == "a"
    assert rows[0]["faithfulness"] == 1.0 and rows[0]["exact_match"] == 0.0
    assert rows[0]["contained"] == 1.0
    assert rows[0]["context_utilisation"] == 0.5
    assert rows[1]["faithfulness"] == 0.0 and rows[1]["missing_facts"] == ["e120"]
    assert "f1" not in rows[1]
    assert rows[2]["refusal"] is True and rows[2]["faithfulness"] == 1.0
    assert rows[3]["faithfulness"] is None
    assert "faithfulness         0.6667" in proc.stdout and "missing faithfulness 1" in proc.stdout


def test_malformed_line_exits_2_naming_file_and_line(tmp_path):
    src = write(tmp_path / "bad.jsonl", [json.dumps(GOOD[0]), "{not json", json.dumps(GOOD[1])])
    proc = judge_here("--input", str(src), "--out", str(tmp_path / "s.jsonl"))
    assert proc.returncode == 2
    assert f"error: {src}:2: malformed JSON" in proc.stderr
    assert not (tmp_path / "s.jsonl").exists()


def test_wrong_field_type_exits_2(tmp_path):
    bad = {**GOOD[0], "retrieved_contexts": "one string"}
    src = write(tmp_path / "bad.jsonl", [json.dumps(bad)])
    proc = judge_here("--input", str(src), "--out", str(tmp_path / "s.jsonl"))
    assert proc.returncode == 2
    assert f"{src}:1: 'retrieved_contexts' must be a list of strings" in proc.stderr
    proc = judge_here("--input", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path / "s.jsonl"))
    assert proc.returncode == 2 and "input not found" in proc.stderr


def test_ragas_judge_with_overrides_and_cache(tmp_path):
    """``--judge ragas --set ...`` against a fake endpoint; with ``--cache`` the second run makes no
    request; the malformed verdict is counted as a judge failure, not a zero."""
    from tests.fake_openai import FakeOpenAI, route

    logs = [GOOD[0], {**GOOD[1], "response": "MALFORMED reply."}]
    src = write(tmp_path / "logs.jsonl", [json.dumps(r) for r in logs])
    with FakeOpenAI(route) as fake:
        args = [
            "--input",
            str(src),
            "--judge",
            "ragas",
            "--set",
            f"base_url={fake.url}",
            "--set",
            "model=fake",
            "--set",
            "retries=0",
            "--set",
            "reference_metrics=false",
            "--cache",
            str(tmp_path / "cache"),
        ]
        proc = judge(*args, "--out", str(tmp_path / "s1.jsonl"))
        assert proc.returncode == 0, proc.stderr
        n_first = len(fake.requests)
        proc2 = judge(*args, "--out", str(tmp_path / "s2.jsonl"))
        assert proc2.returncode == 0, proc2.stderr
    rows = [json.loads(ln) for ln in (tmp_path / "s1.jsonl").read_text().splitlines()]
    assert rows[0]["faithfulness"] == 1.0
    assert rows[1]["faithfulness"] is None and "judge_error" in rows[1]
    assert rows[0]["context_utilisation"] is None  # ragas does not report supported sentences
    assert "judge failures       1 (calls 2, cache hits 0)" in proc.stdout
    assert "judge failures       1 (calls 1, cache hits 1)" in proc2.stdout
    assert all("MALFORMED" in str(r["messages"]) for r in fake.requests[n_first:])


def test_missing_judge_settings_exit_2(tmp_path):
    src = write(tmp_path / "logs.jsonl", [json.dumps(GOOD[0])])
    proc = judge_here("--input", str(src), "--out", str(tmp_path / "s.jsonl"), "--judge", "ragas")
    assert proc.returncode == 2 and "judge=ragas needs model (e.g. --set model=...)" in proc.stderr
    proc = judge_here("--input", str(src), "--out", str(tmp_path / "s.jsonl"), "--set", "oops")
    assert proc.returncode == 2 and "--set expects KEY=VALUE" in proc.stderr
