"""Hostile documents (issue 32): each input reproduced through the real command, then the
behaviour the docs' table (docs/bad_input.md) promises for it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rag_lab.evaluate import evaluate
from tests.cli.helpers import cli, error_line
from tests.compose import compose_evaluate

GOOD = "---\ndoc_id: e102\n---\n# HX-200\n\n## E102 oil temperature high\n\nClean the fins.\n"


def kb(root: Path, files: dict[str, bytes | str] | None = None) -> Path:
    """A BEIR folder whose corpus is ``docs/`` (one good Markdown manual plus ``files``) and one
    query judged on the good manual."""
    docs = root / "docs"
    docs.mkdir(parents=True)
    (docs / "e102.md").write_text(GOOD, encoding="utf-8")
    for name, data in (files or {}).items():
        path = docs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "E102 oil temperature"}\n')
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("q1\te102\t1\n")
    return root


def overrides(root: Path, *extra: str) -> list[str]:
    return [
        "dataset=beir",
        f"dataset.path={root}",
        "dataset.corpus=docs",
        "retrievers=[bm25]",
        "tracking=none",
        "cache.dir=null",
        *extra,
    ]


def run_cli(root: Path, tmp_path: Path, *extra: str):
    return cli("evaluate", *overrides(root, *extra), f"hydra.run.dir={tmp_path / 'run'}")


def run_in_process(root: Path, tmp_path: Path, *extra: str) -> tuple[dict, dict]:
    """``evaluate`` composed as the CLI does: ``(metrics, ingest_report.json)``."""
    metrics = evaluate(compose_evaluate(overrides(root, *extra), tmp_path))
    report = json.loads((tmp_path / "run" / "ingest_report.json").read_text())
    return metrics, report


# -- 16: text 100,000 tags deep -------------------------------------------------------------------


def deep_html(depth: int) -> str:
    return (
        "<html><head><title>Deep</title></head><body>"
        + "<div>" * depth
        + "<p>Spindle overheating alarm E417: check the coolant pump.</p>"
        + "</div>" * depth
        + "</body></html>"
    )


def test_html_text_below_the_nesting_limit_says_so(tmp_path):
    root = kb(tmp_path / "kb", {"deep.html": deep_html(100_000)})
    proc = run_cli(root, tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = error_line(proc)
    assert "deep.html" in line and "nesting limit" in line and "256 levels" in line, line
    assert "boilerplate" not in line
    metrics, report = run_in_process(root, tmp_path, "parser.on_error=skip")
    assert metrics["ingest/n_skipped_files"] == 1
    assert "nesting limit" in report["skipped_files"][0]["error"]


def test_html_nested_within_the_limit_is_read(tmp_path):
    root = kb(tmp_path / "kb", {"deep.html": deep_html(200)})
    metrics, report = run_in_process(root, tmp_path)
    assert metrics["n_documents"] == 2
    assert metrics["ingest/n_skipped_files"] == 0


# -- 8: file names with spaces or a newline --------------------------------------------------------

ODD_NAMES = {
    "Spindle Bearing Guide.txt": "Spindle bearing guide: grease the spindle bearing every 400 h.",
    "line\nbreak.txt": "Coolant pump E417 restart after the line break.",
    "100% tab\there.txt": "Percent and tab in the file name.",
}


def test_ids_with_spaces_or_a_newline_are_escaped_in_trec_files(tmp_path, ranx):
    from rag_lab.io.run_folder import read_trec_qrels, read_trec_run

    root = kb(tmp_path / "kb", dict(ODD_NAMES))
    query = "spindle bearing grease coolant pump percent tab"
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q 1", "text": query}) + "\n")
    (root / "qrels" / "test.tsv").write_text("q 1\tSpindle Bearing Guide\t1\n")
    metrics, _ = run_in_process(root, tmp_path)
    assert metrics["n_documents"] == 4
    run_path, qrels_path = tmp_path / "run" / "run.trec", tmp_path / "run" / "qrels.trec"
    lines = run_path.read_text().splitlines()
    assert all(len(ln.split()) == 6 for ln in lines), lines
    assert any(ln.startswith("q%201 Q0 Spindle%20Bearing%20Guide 1 ") for ln in lines), lines
    assert "line%0Abreak" in run_path.read_text() and "100%25%20tab%09here" in run_path.read_text()
    # other tools read the files as they are (ids stay escaped, alike in run and qrels) ...
    run = ranx.Run.from_file(str(run_path), kind="trec")
    qrels = ranx.Qrels.from_file(str(qrels_path), kind="trec")
    got = ranx.evaluate(qrels, run, ["ndcg@10", "hit_rate@5"])
    assert got["ndcg@10"] == pytest.approx(metrics["ndcg_at_10"], abs=1e-9)
    assert got["hit_rate@5"] == pytest.approx(metrics["hit_rate_at_5"], abs=1e-9)
    # ... and rag_lab's readers give the ids back
    back = read_trec_run(run_path)
    assert "Spindle Bearing Guide" in back["q 1"] and "line\nbreak" in back["q 1"]
    assert read_trec_qrels(qrels_path) == {"q 1": {"Spindle Bearing Guide": 1}}


# -- 6: a Big5 Markdown file ----------------------------------------------------------------------

BIG5_MANUAL = (
    "---\ndoc_id: e417\ntitle: 主軸過熱警報\n---\n# 主軸過熱警報 E417\n\n"
    "當主軸溫度超過設定值時，控制器顯示警報。請檢查冷卻泵與風扇，並確認潤滑油量是否足夠。\n"
)


def test_big5_markdown_names_big5_and_the_command_converts_it(tmp_path):
    root = kb(tmp_path / "kb", {"e417.md": BIG5_MANUAL.encode("big5")})
    proc = run_cli(root, tmp_path)
    assert proc.returncode == 2
    line = error_line(proc)
    # before: "iconv -f gbk" when the first bad line happened to decode as GBK (the whole file
    # does not), else "iconv -f <its encoding>"
    assert f"{root / 'docs' / 'e417.md'}:3: not UTF-8 text (byte 0xa5), likely big5;" in line
    command = line.split("e.g. ", 1)[1]
    assert command == "iconv -f big5 -t utf-8 e417.md > e417.utf8.md"
    if shutil.which("iconv"):  # the command given works
        docs = root / "docs"
        subprocess.run(command, shell=True, cwd=docs, check=True)
        (docs / "e417.utf8.md").replace(docs / "e417.md")
        metrics, _ = run_in_process(root, tmp_path)
        assert metrics["n_documents"] == 2


# -- 7: symbolic links in the corpus folder -------------------------------------------------------


def test_links_out_of_the_corpus_dangling_links_and_linked_folders_are_counted(tmp_path):
    secret = tmp_path / "outside" / "passwd.txt"
    secret.parent.mkdir()
    secret.write_text("root:x:0:0:root:/root:/bin/bash spindle coolant E102\n")
    (tmp_path / "outside" / "manual.md").write_text("# Outside\n\nE102 oil temperature.\n")
    root = kb(tmp_path / "kb", {"sub/e103.md": "# E103\n\nCoolant level low.\n"})
    docs = root / "docs"
    (docs / "passwd.txt").symlink_to(secret)  # a file outside the corpus folder
    (docs / "outside").symlink_to(secret.parent, target_is_directory=True)  # a linked folder
    (docs / "gone.md").symlink_to(tmp_path / "missing.md")  # a dangling link
    (docs / "latest.md").symlink_to(docs / "sub" / "e103.md")  # inside the folder: read
    (docs / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (docs / "figure.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    metrics, report = run_in_process(root, tmp_path, "parser.on_error=skip")
    # before: passwd.txt indexed as a document; the linked folder, the dangling link, the hidden
    # file and the image left out without a count
    sources = {d["source"] for d in report["documents"]}
    assert sources == {"e102.md", "sub/e103.md", "latest.md"}, sources
    links = {Path(s["source"]).name: s["reason"] for s in report["skipped_links"]}
    assert set(links) == {"passwd.txt", "outside", "gone.md"}
    assert "outside the corpus folder" in links["passwd.txt"]
    assert "outside the corpus folder" in links["outside"]
    assert "dangling link" in links["gone.md"]
    unread = {Path(s["source"]).name: s["reason"] for s in report["unread_files"]}
    assert unread == {".DS_Store": "a hidden file", "figure.png": "no parser reads .png"}
    assert metrics["ingest/n_skipped_links"] == 3 and metrics["ingest/n_unread_files"] == 2
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert written["ingest/n_skipped_links"] == 3 and written["ingest/n_unread_files"] == 2


def test_a_corpus_of_links_out_only_is_an_empty_corpus_naming_them(tmp_path):
    outside = tmp_path / "elsewhere.md"
    outside.write_text("# Elsewhere\n\nE102.\n")
    root = kb(tmp_path / "kb")
    (root / "docs" / "e102.md").unlink()
    (root / "docs" / "e102.md").symlink_to(outside)
    proc = run_cli(root, tmp_path)
    assert proc.returncode == 2
    line = error_line(proc)
    assert "corpus folder is empty" in line and "1 entries left out" in line, line
    assert "e102.md: a link to" in line and "outside the corpus folder" in line


# -- 13: SQLite files in the corpus ---------------------------------------------------------------


def tickets_db(path: Path) -> Path:
    import sqlite3

    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE tickets (id TEXT, title TEXT, body TEXT)")
        con.execute("INSERT INTO tickets VALUES ('T-1', 'Spindle', 'Spindle alarm E417 cleared')")
        con.execute("INSERT INTO tickets VALUES ('T-2', 'Coolant', 'Coolant pump replaced')")
    return path


QUERY = 'parser.parsers.sqlite.query="SELECT id, title, body AS text FROM tickets"'


def test_sqlite_files_are_left_out_and_counted_until_a_query_is_set(tmp_path):
    root = kb(tmp_path / "kb")
    tickets_db(root / "docs" / "tickets.sqlite")
    metrics, report = run_in_process(root, tmp_path)
    # before: the file was left out without a word
    assert metrics["n_documents"] == 1 and metrics["ingest/n_unread_files"] == 1
    [entry] = report["unread_files"]
    assert entry["reason"] == (
        "a SQLite database: no query set to run on it (parser.parsers.sqlite)"
    )
    metrics, report = run_in_process(root, tmp_path, QUERY)
    assert metrics["n_documents"] == 3 and metrics["ingest/n_unread_files"] == 0
    assert {d["doc_id"] for d in report["documents"]} == {"e102", "T-1", "T-2"}


def test_the_sql_parser_composes_for_another_suffix_and_a_half_override_is_one_line(tmp_path):
    root = kb(tmp_path / "kb")
    tickets_db(root / "docs" / "tickets.db")
    db_query = 'parser.parsers.db.query="SELECT id, body AS text FROM tickets"'
    metrics, _ = run_in_process(root, tmp_path, "+parser@parser.parsers.db=sql_records", db_query)
    assert metrics["n_documents"] == 3
    # before: AttributeError: 'dict' object has no attribute 'parse' (a traceback)
    proc = run_cli(root, tmp_path, "+parser.parsers.db=sql_records", f"+{db_query}")
    assert proc.returncode == 2
    line = error_line(proc)
    assert "parser.parsers.db: settings (query) without a parser" in line
    assert "+parser@parser.parsers.db=sql_records" in line


# -- 5: a zip bomb of a .docx ---------------------------------------------------------------------


def bomb_docx(path: Path, paragraphs: int, chars: int) -> Path:
    """A real Word file (python-docx) whose body is then replaced, streamed into the zip, by
    ``paragraphs`` paragraphs of ``chars`` repeated characters each: a few hundred KB on disk."""
    import zipfile

    import docx

    docx.Document().save(str(path))
    with zipfile.ZipFile(path) as src:
        parts = {i.filename: src.read(i) for i in src.infolist()}
    body = parts["word/document.xml"].decode()
    head, tail = body.split("<w:body>")[0] + "<w:body>", "</w:body>" + body.split("</w:body>")[1]
    para = (
        "<w:p><w:r><w:t>"
        + "Spindle overheating alarm E417. " * (chars // 32)
        + "</w:t></w:r></w:p>"
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for name, data in parts.items():
            if name != "word/document.xml":
                out.writestr(name, data)
        with out.open("word/document.xml", "w", force_zip64=True) as fh:
            fh.write(head.encode())
            block = para.encode() * 100
            for _ in range(paragraphs // 100):
                fh.write(block)
            fh.write(tail.encode())
    return path


def test_a_docx_unzipping_past_the_limit_is_refused_before_inflating(tmp_path):
    root = kb(tmp_path / "kb")
    bomb = bomb_docx(root / "docs" / "bomb.docx", paragraphs=7_400, chars=8_200)  # 62 MB of XML
    assert bomb.stat().st_size < 1_000_000
    proc = run_cli(root, tmp_path)
    assert proc.returncode == 2
    line = error_line(proc)
    assert "bomb.docx: Word file too large: 62 MB of XML unzipped from" in line, line
    assert "(limit 50 MB: parser.parsers.docx.max_xml_mb)" in line
    metrics, report = run_in_process(root, tmp_path, "parser.on_error=skip")
    assert metrics["ingest/n_skipped_files"] == 1 and metrics["n_documents"] == 1
    assert "too large" in report["skipped_files"][0]["error"]
    # the limit is an option: a 1.7 MB body is read by default, refused under 1 MB
    bomb.unlink()
    bomb_docx(root / "docs" / "long.docx", paragraphs=200, chars=8_200)
    metrics, _ = run_in_process(root, tmp_path)
    assert metrics["n_documents"] == 2
    metrics, _ = run_in_process(
        root, tmp_path, "parser.on_error=skip", "parser.parsers.docx.max_xml_mb=1"
    )
    assert metrics["n_documents"] == 1 and metrics["ingest/n_skipped_files"] == 1
