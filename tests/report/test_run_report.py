"""report.html of a run folder: one self-contained file, every section, untrusted text escaped."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from rag_lab.cli.report import run as report_cli
from rag_lab.report import write_run_report
from tests.report.conftest import IMG, SCRIPT, Runs


@pytest.fixture(scope="module")
def page(runs: Runs) -> str:
    path = write_run_report(runs.a)
    assert path == runs.a / "report.html"
    return path.read_text(encoding="utf-8")


def test_sections_and_every_query(page: str, runs: Runs) -> None:
    for anchor in ("run", "metrics", "categories", "plots", "queries"):
        assert f'<section id="{anchor}">' in page
    table = pd.read_parquet(runs.a / "per_query.parquet")
    # one collapsible row per query, each with its id
    assert page.count('<details class="q"') == len(table)
    for qid in table["query_id"]:
        assert f"<code>{qid}</code>" in page
    # headline rows with a CI: metric, mean, low, high
    assert re.search(r"<td[^>]*>ndcg_at_10</td><td[^>]*>0\.\d{4}</td><td[^>]*>0\.\d{4}</td>", page)
    # the gold: q1's judged document d1 (grade 2) and its answer string
    assert "70 °C" in page and ">d1<" in page


def test_self_contained(page: str) -> None:
    # nothing loaded from anywhere: images are data: URIs, links are in-page anchors
    refs = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert refs and all(r.startswith(("data:image/png;base64,", "#")) for r in refs)
    assert "default-src 'none'" in page  # the CSP forbids fetching even if something slipped in
    assert "<link" not in page and "@import" not in page


def test_untrusted_text_is_shown_as_text(page: str) -> None:
    assert SCRIPT not in page and IMG not in page
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert page.count("<script>") == 1  # the page's own filter script, nothing else
    # the chunk's "</details></div>" did not close the page's elements
    assert page.count("<details") == page.count("</details>")


def test_without_config_the_report_still_writes(runs: Runs, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(runs.a, bare)
    (bare / "config_resolved.yaml").unlink()
    text = write_run_report(bare).read_text(encoding="utf-8")
    assert "no config_resolved.yaml: chunk texts and gold are not shown" in text
    assert "(chunk text not available)" in text


def test_cli(runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report_cli([str(runs.b)]) == 0
    assert "report: " in capsys.readouterr().out and (runs.b / "report.html").is_file()
    assert report_cli([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
