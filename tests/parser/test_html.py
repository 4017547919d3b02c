"""rag_lab.parser.html: main text without boilerplate, headings as sections, tables, metadata from
meta tags, lenient reading of broken markup, one-line errors for pages with no main text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rag_lab.errors import DataError
from rag_lab.parser._builder import markdown_tables
from rag_lab.parser.html import HtmlParser
from rag_lab.pipeline.corpus import parse_corpus
from rag_lab.validate import OptionError

PAGE = """<!DOCTYPE html>
<html lang="zh-CN">
<head>
<meta charset="utf-8">
<title>HX-200 维护手册 | Acme Support</title>
<meta property="og:title" content="HX-200 维护手册">
<meta name="doc_id" content="hx200-web">
<meta name="version" content="3.1">
<meta name="valid_from" content="2024-01-15">
<meta name="entities" content="HX-200, E102; E105">
<meta name="description" content="not a contract field">
<script>var tracking = "window.dataLayer";</script>
<style>.cookie { color: red }</style>
</head>
<body>
<div id="cookie-banner" class="cookie-consent">We use cookies to improve your experience.
  <button>Accept all cookies</button></div>
<header><div class="logo">Acme Corp</div>
<nav><ul><li><a href="/">Home</a></li><li><a href="/products">Products</a></li>
<li><a href="/support">Support portal</a></li></ul></nav></header>
<aside class="sidebar"><h3>Related links</h3>
<ul><li><a href="/a">Other manuals</a></li><li><a href="/b">Sales contact</a></li></ul></aside>
<main>
<article>
<h1>HX-200 维护手册</h1>
<p>本手册介绍 HX-200 液压单元的日常维护和故障排除。请在操作前阅读全部安全说明。</p>
<h2>故障代码</h2>
<p>当控制面板显示故障代码时，请按照下表进行处理。油温超过 80℃ 时系统会自动停机。</p>
<h3>E102 油温过高</h3>
<p>E102 表示油温过高。检查冷却风扇是否运转，并确认散热器没有被灰尘堵塞。</p>
<table>
<thead><tr><th>代码</th><th>含义</th><th>处理</th></tr></thead>
<tbody>
<tr><td>E102</td><td>油温过高 (&gt; 80℃)</td><td>检查冷却风扇</td></tr>
<tr><td>E105</td><td>压力过低</td><td>检查油位 | 补油</td></tr>
</tbody>
</table>
<h3>E105 压力过低</h3>
<p>E105 表示系统压力低于 5 MPa。可能原因如下：</p>
<ul><li>油位过低</li><li>泵磨损</li><li>溢流阀卡滞</li></ul>
<h2>保养周期</h2>
<p>每运行 500 小时更换一次液压油，每 1000 小时更换滤芯。</p>
</article>
</main>
<footer><p>© 2024 Acme Corp. All rights reserved.</p>
<p><a href="/privacy">Privacy policy</a> | <a href="/imprint">Imprint</a></p></footer>
</body></html>
"""

BODY = "<p>This page describes the maintenance of the pump unit in enough detail to be read.</p>"


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    return path


def parse_one(path: Path, root: Path, **kw):
    docs = list(HtmlParser(**kw).parse(path, root))
    assert len(docs) == 1
    return docs[0]


def article(inner: str, head: str = "") -> str:
    return f"<html><head>{head}</head><body><article>{inner}</article></body></html>"


def test_realistic_page_main_text_sections_table_and_metadata(tmp_path):
    doc = parse_one(write(tmp_path / "web" / "hx200.html", PAGE), tmp_path)
    assert doc.doc_id == "hx200-web"
    assert doc.title == "HX-200 维护手册"  # og:title: without the site suffix of <title>
    assert dict(doc.metadata) == {
        "version": "3.1",
        "valid_from": "2024-01-15",
        "entities": ["HX-200", "E102", "E105"],
        "language": "zh-CN",  # from <html lang>
        "source": "web/hx200.html",
    }
    # boilerplate is gone: cookie banner, logo, navigation, sidebar, footer, scripts
    for junk in (
        "cookies",
        "Acme Corp",
        "Products",
        "Support portal",
        "Related links",
        "Sales contact",
        "All rights reserved",
        "Privacy policy",
        "dataLayer",
        "not a contract field",
    ):
        assert junk not in doc.text, junk
    # Chinese text and symbols intact
    assert "油温超过 80℃ 时系统会自动停机。" in doc.text
    assert "每运行 500 小时更换一次液压油，每 1000 小时更换滤芯。" in doc.text
    paths = [s.path for s in doc.sections]
    assert paths == [
        ("HX-200 维护手册",),
        ("HX-200 维护手册", "故障代码"),
        ("HX-200 维护手册", "故障代码", "E102 油温过高"),
        ("HX-200 维护手册", "故障代码", "E102 油温过高"),  # the table, a section of its own
        ("HX-200 维护手册", "故障代码", "E105 压力过低"),
        ("HX-200 维护手册", "保养周期"),
    ]
    for sec in doc.sections:
        if sec.metadata.get("kind") != "table":
            assert doc.text[sec.start :].startswith("#" * len(sec.path) + " " + sec.path[-1])
    table = doc.sections[3]
    assert dict(table.metadata) == {"kind": "table", "table": 1}
    assert markdown_tables(doc.text[table.start : table.end]) == [
        [
            ["代码", "含义", "处理"],
            ["E102", "油温过高 (> 80℃)", "检查冷却风扇"],
            ["E105", "压力过低", "检查油位 | 补油"],
        ]
    ]
    assert "- 油位过低\n- 泵磨损\n- 溢流阀卡滞" in doc.text
    assert doc.stats["tables"] == 1 and doc.stats["sections"] == 5


def test_merged_cells_repeat_their_text_and_caption_is_kept(tmp_path):
    table = (
        "<table><caption>Table 1: Limits</caption>"
        "<thead><tr><th rowspan=2>Code</th><th colspan=2>Temperature</th></tr>"
        "<tr><th>min</th><th>max</th></tr></thead>"
        "<tbody><tr><td>E1</td><td colspan=2>n/a</td></tr>"
        "<tr><td rowspan=2>E2</td><td>1</td><td>2</td></tr>"
        "<tr><td>3</td><td>4</td></tr></tbody></table>"
    )
    path = write(tmp_path / "t.html", article(f"<h2>Specs</h2>{BODY}{table}<p>After.</p>"))
    doc = parse_one(path, tmp_path)
    sec = next(s for s in doc.sections if s.metadata.get("kind") == "table")
    assert sec.metadata["caption"] == "Table 1: Limits"
    assert doc.text[sec.start :].startswith("**Table 1: Limits**")
    assert markdown_tables(doc.text) == [
        [
            ["Code", "Temperature", "Temperature"],
            ["Code", "min", "max"],
            ["E1", "n/a", "n/a"],
            ["E2", "1", "2"],
            ["E2", "3", "4"],
        ]
    ]
    assert "Table 1: Limits" not in markdown_tables(doc.text)[0][0]  # not a header row


def test_nested_table_becomes_cell_text(tmp_path):
    nested = "<table><tr><td>in1</td><td>in2</td></tr><tr><td>in3</td><td>in4</td></tr></table>"
    table = (
        f"<table><tr><th>A</th><th>B</th></tr><tr><td>x</td><td>see {nested} end</td></tr></table>"
    )
    doc = parse_one(write(tmp_path / "n.html", article(f"<h2>Specs</h2>{BODY}{table}")), tmp_path)
    assert markdown_tables(doc.text) == [[["A", "B"], ["x", "see in1, in2; in3, in4 end"]]]
    assert doc.stats["tables"] == 1


def test_h1_in_the_page_header_heads_the_sections(tmp_path):
    page = (
        "<html><head><title>Pump | Acme</title></head><body><header>"
        "<nav><a href='/'>Home</a> <a href='/docs'>Docs</a></nav><h1>Pump maintenance</h1>"
        f"</header><main><h2>Oil</h2>{BODY}<h2>Filter</h2>"
        "<p>Change the filter every 1000 hours of operation, or earlier when it is dirty.</p>"
        "</main><footer>© 2024 Acme</footer></body></html>"
    )
    doc = parse_one(write(tmp_path / "p.html", page), tmp_path)
    assert [s.path for s in doc.sections] == [
        ("Pump maintenance",),
        ("Pump maintenance", "Oil"),
        ("Pump maintenance", "Filter"),
    ]
    assert doc.title == "Pump | Acme"  # <title> when there is no og:title
    assert "Home" not in doc.text and "Acme" not in doc.text


def test_lists_code_and_title_fallbacks(tmp_path):
    inner = (
        f"<h2>Commands</h2>{BODY}<pre><code>make build\nmake test</code></pre>"
        "<ol><li>one<ul><li>nested</li></ul></li><li>two</li></ol>"
    )
    doc = parse_one(write(tmp_path / "sub" / "c.htm", article(inner)), tmp_path)
    assert doc.doc_id == "sub/c" and doc.metadata["source"] == "sub/c.htm"
    assert doc.title == "Commands"  # no <title>: the first heading
    assert "```\nmake build\nmake test\n```" in doc.text
    assert "- one\n  - nested\n- two" in doc.text


def test_meta_prefix_and_fields(tmp_path):
    head = (
        '<meta name="rag:doc_id" content="pump-1"><meta name="doc_id" content="ignored">'
        '<meta name="rag:valid_to" content="2025-12-31"><meta name="rag:owner" content="ops">'
        '<meta name="rag:language" content="en">'
    )
    path = write(tmp_path / "m.html", f'<html lang="de">{article(BODY, head)[6:]}')
    doc = parse_one(
        path, tmp_path, meta_prefix="rag:", meta_fields=["doc_id", "valid_to", "language"]
    )
    assert doc.doc_id == "pump-1"
    assert dict(doc.metadata) == {"valid_to": "2025-12-31", "language": "en", "source": "m.html"}


def test_bad_contract_date_is_refused(tmp_path):
    path = write(tmp_path / "d.html", article(BODY, '<meta name="valid_from" content="soon">'))
    with pytest.raises(DataError, match=r"d\.html: valid_from='soon' is not an ISO date"):
        parse_one(path, tmp_path)


def test_broken_markup_is_read_leniently(tmp_path):
    broken = (
        "<html><body><article><h1>Title here</h1><p>First paragraph with some text that is "
        "long enough.<p>Second unclosed paragraph <b>bold text never closed<div>tail of the"
    )
    doc = parse_one(write(tmp_path / "b.html", broken), tmp_path)
    assert doc.sections[0].path == ("Title here",)
    assert "First paragraph with some text" in doc.text
    assert "Second unclosed paragraph bold text never closed" in doc.text
    nul = article("<h1>Nul\x00 page</h1><p>Body\x00 text with a NUL byte, still readable.</p>")
    doc = parse_one(write(tmp_path / "nul.html", nul), tmp_path)
    assert "Body text with a NUL byte" in doc.text


def test_declared_charset_is_used(tmp_path):
    page = article("<h1>泵的维护</h1><p>检查油位并更换滤芯，每运行五百小时更换一次液压油。</p>")
    page = page.replace("<head>", "<head><meta charset='gbk'>")
    doc = parse_one(write(tmp_path / "gbk.html", page.encode("gbk")), tmp_path)
    assert "检查油位并更换滤芯" in doc.text and doc.sections[0].path == ("泵的维护",)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (
            "<html><head><title>x</title></head><body><nav><ul><li><a href='/'>Home</a></li>"
            "<li><a href='/b'>About</a></li></ul></nav><footer>© 2024 Acme</footer></body></html>",
            "boilerplate",
        ),
        (os.urandom(600), "not UTF-8"),
        ("", "empty"),
        ("   \n\t", "empty"),
        (article("<p>泵的维护</p>").encode("gbk"), "no <meta charset>"),
        ("<html><head><meta charset='x-nonsense'></head></html>\xff".encode("latin-1"), "charset"),
    ],
)
def test_no_main_text_is_a_one_line_error(tmp_path, content, why):
    path = write(tmp_path / "bad.html", content)
    with pytest.raises(DataError, match=r"bad\.html: no main text found in the HTML") as info:
        parse_one(path, tmp_path)
    assert why in str(info.value) and "\n" not in str(info.value)


def test_options_are_checked():
    with pytest.raises(OptionError, match="favor_precision"):
        HtmlParser(favor_precision="yes")
    with pytest.raises(OptionError, match="meta_fields"):
        HtmlParser(meta_fields="doc_id")


def test_parse_corpus_reads_html(tmp_path):
    write(tmp_path / "a.html", PAGE)
    write(tmp_path / "b.htm", article(f"<h2>Other</h2>{BODY}"))
    docs = parse_corpus(HtmlParser(), sorted(tmp_path.iterdir()), tmp_path)
    assert [d.doc_id for d in docs] == ["hx200-web", "b"]


def test_a_page_of_furniture_only_is_refused_and_an_article_header_kept(tmp_path):
    """Found by tests/reliability/test_documents.py: trafilatura's fallback returned the menu
    ("Home") of a short page as its main text."""
    from rag_lab.errors import DataError
    from rag_lab.parser.html import HtmlParser

    path = tmp_path / "menu.html"
    path.write_text(
        "<html><body><nav><a href=/>Home</a> <a href=/p>Products</a></nav>"
        "<footer>(c) 2024 ACME</footer><div",
        encoding="utf-8",
    )
    with pytest.raises(DataError, match="no main text"):
        list(HtmlParser().parse(path, tmp_path))
    path.write_text(
        "<html><body><nav><a href=/>Home</a></nav><article><header><h1>E102 油温过高</h1>"
        "</header><p>检查冷却器散热片是否被油泥覆盖，清洗后复位。Fan current must be below 2 A."
        "</p></article></body></html>",
        encoding="utf-8",
    )
    (doc,) = list(HtmlParser().parse(path, tmp_path))
    assert "E102 油温过高" in doc.text and "Home" not in doc.text
