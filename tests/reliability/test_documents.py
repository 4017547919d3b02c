"""Bad documents (issue 11): each a one-line error naming the file (and page), exit 2, through the
real command; with ``parser.on_error=skip`` the run goes on, counts them in ``metrics.json`` and
keeps every good document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_lab.evaluate import evaluate
from tests.cli.helpers import cli, error_line
from tests.compose import compose_evaluate
from tests.parser import pdf_fixtures

pytestmark = pytest.mark.skipif(
    not (pdf_fixtures.have_cjk_font() and pdf_fixtures.SANS_FONT.is_file()),
    reason="fonts for the PDF fixtures missing (scripts/install_system_deps.sh)",
)

GOOD = {
    "e102.md": "---\ndoc_id: e102\n---\n# HX-200\n\n## E102 油温过高\n\n清洗冷却器散热片。\n",
    "sv0432.md": "---\ndoc_id: sv0432\n---\n# SV7\n\n## SV0432 直流母线过电压\n\n检查制动电阻。\n",
}


def bad_files(docs: Path) -> dict[str, str]:
    """file name → what its one-line error must say."""
    good_pdf = pdf_fixtures.manual_pdf(docs / "good.pdf")
    raw = good_pdf.read_bytes()
    good_pdf.unlink()
    (docs / "truncated.pdf").write_bytes(raw[: len(raw) // 2])
    (docs / "garbage.pdf").write_bytes(b"\x00\x01 not a pdf at all " * 40)
    pdf_fixtures.encrypted_pdf(docs / "encrypted.pdf")
    pdf_fixtures.zero_page_pdf(docs / "empty.pdf")
    pdf_fixtures.scanned_pdf(docs / "scan-only.pdf", with_text_pages=False)
    (docs / "broken.html").write_bytes(b"<html><body><nav><a href=/>Home</a></nav><div")
    (docs / "not-a-zip.docx").write_text("this is plain text, not a Word file")
    (docs / "tickets.csv").write_text("id,body\nT-1,E102 油温过高\n", encoding="utf-8")
    (docs / "tickets.sql").write_text("SELECT id, text FROM tickets", encoding="utf-8")
    return {
        "truncated.pdf": "not a readable PDF",
        "garbage.pdf": "not a readable PDF",
        "encrypted.pdf": "encrypted PDF",
        "empty.pdf": "PDF has no pages",
        "scan-only.pdf": "no text layer on any of its",
        "broken.html": "no main text",
        "not-a-zip.docx": "not a Word .docx file",
        "tickets.csv": "text",
        "tickets.sql": "cannot read from sqlite:////nonexistent",
    }


# the .sql file's query runs on a database that is not there (no server is needed to test it)
SQL = (
    "+parser.parsers.sql={_target_:rag_lab.parser.sql_records.SqlRecordsParser,"
    "url:'sqlite:////nonexistent/tickets.db'}"
)


def dataset(root: Path) -> tuple[Path, dict[str, str]]:
    docs = root / "docs"
    docs.mkdir(parents=True)
    for name, text in GOOD.items():
        (docs / name).write_text(text, encoding="utf-8")
    expected = bad_files(docs)
    (root / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "E102 油温过高"}\n{"_id": "q2", "text": "SV0432"}\n',
        encoding="utf-8",
    )
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("q1\te102\t1\nq2\tsv0432\t1\n")
    return root, expected


def only(root: Path, keep: str) -> None:
    for p in (root / "docs").iterdir():
        if p.name not in GOOD and p.name != keep:
            p.rename(root / p.name)  # out of the corpus, still on disk


def put_back(root: Path) -> None:
    for p in root.iterdir():
        if p.is_file() and p.suffix in (".pdf", ".html", ".docx", ".csv", ".sql"):
            p.rename(root / "docs" / p.name)


def test_each_bad_file_is_one_line_naming_it_with_exit_2(tmp_path):
    root, expected = dataset(tmp_path / "kb")
    for name, words in expected.items():
        only(root, name)
        proc = cli(
            "evaluate",
            "dataset=beir",
            f"dataset.path={root}",
            "dataset.corpus=docs",
            "retrievers=[bm25]",
            "tracking=none",
            "cache.dir=null",
            "parser.parsers.pdf.ocr=off",  # an image-only PDF is then refused
            SQL,
            f"hydra.run.dir={tmp_path / 'run'}",
        )
        assert proc.returncode == 2, (name, proc.stderr[-2000:])
        line = error_line(proc)
        assert name in line and words in line, (name, line)
        put_back(root)


def test_on_error_skip_counts_them_and_keeps_the_good_documents(tmp_path):
    root, expected = dataset(tmp_path / "kb")
    cfg = compose_evaluate(
        [
            "dataset=beir",
            f"dataset.path={root}",
            "dataset.corpus=docs",
            "retrievers=[bm25]",
            "tracking=none",
            "cache.dir=null",
            "parser.on_error=skip",
            "parser.parsers.pdf.ocr=off",
            SQL,
        ],
        tmp_path,
    )
    metrics = evaluate(cfg)
    assert metrics["ingest/n_skipped_files"] == len(expected)
    assert metrics["n_documents"] == len(GOOD)
    assert metrics["hit_rate_at_5"] == 1.0  # nothing else lost
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert written["ingest/n_skipped_files"] == len(expected)
    report = json.loads((tmp_path / "run" / "ingest_report.json").read_text())
    skipped = {Path(s["source"]).name: s["error"] for s in report["skipped_files"]}
    assert set(skipped) == set(expected)
    for name, words in expected.items():
        assert words in skipped[name] and "\n" not in skipped[name]
