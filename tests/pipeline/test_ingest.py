"""Ingest: parsed files cached one by one (a chunker or contract sweep never re-parses, an edit
re-parses that file only), the ingest report, and `parser.on_error=skip` for refused files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_lab.errors import DataError
from rag_lab.evaluate import evaluate
from tests.cli.helpers import cli, error_line
from tests.compose import compose_evaluate

MANUALS = {
    "e102.md": "---\ndoc_id: e102\ndoc_type: manual\nversion: '2.1'\nvalid_from: 2024-01-01\n---\n"
    "# HX-200\n\n## E102 油温过高\n\n### 可能原因\n冷却器散热片堵塞。\n",
    "e105.md": "---\ndoc_id: e105\ndoc_type: manual\nversion: '2.1'\n---\n"
    "# HX-200 油位\n\n## E105 油位过低\n\n补油至上限。\n",
    "sv0432.md": "---\ndoc_id: sv0432\ndoc_type: manual\nversion: '3.2'\nvalid_from: 2024-02-01\n"
    "---\n# SV7\n\n## SV0432 直流母线过电压\n\n制动电阻断线。\n",
}


def dataset(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir(parents=True)
    for name, text in MANUALS.items():
        (docs / name).write_text(text, encoding="utf-8")
    queries = [
        {"_id": "q1", "text": "E102 油温过高 原因"},
        {"_id": "q2", "text": "SV0432 过电压"},
    ]
    (root / "queries.jsonl").write_text(
        "\n".join(json.dumps(q, ensure_ascii=False) for q in queries)
    )
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\te102\t1\nq2\tsv0432\t1\n"
    )
    return root


def run(tmp_path: Path, data: Path, *extra: str) -> dict:
    cfg = compose_evaluate(
        [
            "dataset=beir",
            f"dataset.path={data}",
            "dataset.corpus=docs",
            "parser=auto",
            "chunker=recursive",
            "tokenizer=jieba",
            "retrievers=[bm25]",
            "tracking=none",
            f"cache.dir={tmp_path / 'cache'}",
            *extra,
        ],
        tmp_path,
    )
    return evaluate(cfg)


def parsed(m: dict) -> tuple[int, int]:
    return int(m.get("cache/parsed_files/hits", 0)), int(m.get("cache/parsed_files/misses", 0))


def test_parsed_files_are_cached_one_by_one(tmp_path):
    data = dataset(tmp_path / "kb")
    cold = run(tmp_path, data)
    assert parsed(cold) == (0, 3)
    assert cold["ingest/n_files"] == 3 and cold["ingest/n_skipped_files"] == 0
    # a chunker sweep reads the parsed documents back: no file is opened again
    assert parsed(run(tmp_path, data, "chunker.max_chars=40")) == (0, 0)
    # a contract change re-checks the documents from the per-file entries, never re-parses
    assert parsed(run(tmp_path, data, "contract.default_source_type=ticket")) == (3, 0)
    # another format's parser changed: the Markdown files' entries still hold
    assert parsed(run(tmp_path, data, "parser.parsers.html=plain_text")) == (3, 0)
    # an edited file is the only one parsed again
    (data / "docs" / "e105.md").write_text(
        MANUALS["e105.md"] + "\n检查油位计。\n", encoding="utf-8"
    )
    assert parsed(run(tmp_path, data)) == (2, 1)


def test_the_ingest_report_names_documents_and_contract_problems(tmp_path):
    data = dataset(tmp_path / "kb")
    metrics = run(tmp_path, data)
    report = json.loads((tmp_path / "run" / "ingest_report.json").read_text())
    rows = {r["doc_id"]: r for r in report["documents"]}
    assert set(rows) == {"e102", "e105", "sv0432"}
    assert rows["e102"]["source"].endswith("e102.md") and rows["e102"]["sections"] >= 2
    # e105 lacks valid_from, which the shipped contract requires of a manual
    assert rows["e105"]["contract_problems"] == [
        "valid_from: missing (required for source_type manual)"
    ]
    assert metrics["ingest/n_contract_problems"] == 1
    assert report["totals"]["n_contract_problems"] == 1
    # a fully cached rerun still writes the report
    (tmp_path / "run" / "ingest_report.json").unlink()
    run(tmp_path, data)
    assert json.loads((tmp_path / "run" / "ingest_report.json").read_text()) == report


def test_contract_strict_stops_naming_file_and_field(tmp_path):
    data = dataset(tmp_path / "kb")
    with pytest.raises(DataError, match=r"e105\.md: document 'e105': valid_from: missing"):
        run(tmp_path, data, "contract.mode=strict")


def test_a_refused_file_stops_the_run_or_is_skipped_and_counted(tmp_path):
    data = dataset(tmp_path / "kb")
    bad = data / "docs" / "broken.md"
    bad.write_text("---\ndoc_id: [unclosed\n---\nbody\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"broken\.md:\d+: malformed YAML front matter"):
        run(tmp_path, data)
    metrics = run(tmp_path, data, "parser.on_error=skip")
    assert metrics["ingest/n_skipped_files"] == 1 and metrics["n_documents"] == 3
    report = json.loads((tmp_path / "run" / "ingest_report.json").read_text())
    assert [s["source"] for s in report["skipped_files"]] == [str(bad)]
    assert "malformed YAML front matter" in report["skipped_files"][0]["error"]
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert written["ingest/n_skipped_files"] == 1


def test_the_cli_refuses_in_one_line_with_exit_2(tmp_path):
    data = dataset(tmp_path / "kb")
    (data / "docs" / "broken.md").write_text("---\ndoc_id: [x\n---\n", encoding="utf-8")
    proc = cli(
        "evaluate",
        "dataset=beir",
        f"dataset.path={data}",
        "dataset.corpus=docs",
        "retrievers=[bm25]",
        "tracking=none",
        "cache.dir=null",
        f"hydra.run.dir={tmp_path / 'run'}",
        "parser.on_error=maybe",
    )
    assert proc.returncode == 2
    assert "parser.on_error" in error_line(proc)
