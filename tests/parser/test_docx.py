"""rag_lab.parser.docx: body in reading order, heading styles as sections, tables with merged and
nested cells, core properties and the comments-YAML convention as metadata, one-line errors."""

from __future__ import annotations

import datetime as dt
import zipfile
from pathlib import Path

import docx
import pytest

from rag_lab.errors import DataError
from rag_lab.parser._builder import markdown_tables
from rag_lab.parser.docx import DocxParser


def test_docx_import_is_python_docx():
    # rag_lab/parser/docx.py must not shadow the library it imports
    assert hasattr(docx, "Document") and "site-packages" in str(Path(docx.__file__))


def build_manual(path: Path) -> Path:
    d = docx.Document()
    d.add_paragraph("HX-200 维护手册", style="Title")
    d.add_paragraph("Intro before any heading: read the safety notes.")
    d.add_heading("安全说明", level=1)
    d.add_paragraph("工作温度 ≤ 80℃，尺寸 200×300 mm。")
    d.add_paragraph("Wear gloves", style="List Bullet")
    d.add_paragraph("Wear goggles", style="List Bullet 2")
    d.add_heading("E102 油温过高", level=2)
    d.add_paragraph("Table 1: fault codes", style="Caption")
    t = d.add_table(rows=3, cols=3)
    cells = [["代码", "含义", "处理"], ["E102", "油温过高", "检查风扇"], ["E105", "压力低", ""]]
    for i, row in enumerate(cells):
        for j, text in enumerate(row):
            t.cell(i, j).text = text
    t.cell(1, 2).merge(t.cell(2, 2))  # "检查风扇" spans two rows (the empty cell's text is lost)
    d.add_paragraph("After the table.")
    d.add_heading("保养", level=1)
    d.add_paragraph("Line one\nline two")
    props = d.core_properties
    props.identifier = "hx200-docx"
    props.title = ""
    props.subject = "Hydraulics"
    props.author = "Service team"
    props.keywords = "HX-200, E102; pump"
    props.category = ""
    props.created = dt.datetime(2024, 1, 10, 8, 30)
    props.modified = dt.datetime(2024, 2, 1, 9, 0)
    props.revision = 3
    props.version = "2.1"
    props.language = "zh-CN"
    props.comments = "valid_from: 2024-01-01\nvalid_to: 2025-06-30\nsource_type: manual"
    path.parent.mkdir(parents=True, exist_ok=True)
    d.save(path)
    return path


def parse_one(path: Path, root: Path, **kw):
    docs = list(DocxParser(**kw).parse(path, root))
    assert len(docs) == 1
    return docs[0]


def test_word_manual_sections_table_and_metadata(tmp_path):
    path = build_manual(tmp_path / "manuals" / "hx200.docx")
    doc = parse_one(path, tmp_path)
    assert doc.doc_id == "hx200-docx"
    assert doc.title == "HX-200 维护手册"  # the Title paragraph (the core title is empty)
    assert dict(doc.metadata) == {
        "subject": "Hydraulics",
        "author": "Service team",
        "keywords": ["HX-200", "E102", "pump"],
        "created": "2024-01-10T08:30:00+00:00",  # stored as UTC
        "modified": "2024-02-01T09:00:00+00:00",
        "revision": 3,
        "version": "2.1",
        "language": "zh-CN",
        "valid_from": "2024-01-01",
        "valid_to": "2025-06-30",
        "source_type": "manual",
        "source": "manuals/hx200.docx",
    }
    assert "工作温度 ≤ 80℃，尺寸 200×300 mm。" in doc.text
    assert "- Wear gloves\n  - Wear goggles" in doc.text
    assert "Line one\nline two" in doc.text
    paths = [s.path for s in doc.sections]
    assert paths == [
        ("HX-200 维护手册",),  # the Title is a level-1 heading
        ("安全说明",),
        ("安全说明", "E102 油温过高"),
        ("安全说明", "E102 油温过高"),  # the table
        ("安全说明", "E102 油温过高"),  # text after the table
        ("保养",),
    ]
    assert doc.text.startswith("# HX-200 维护手册\n\nIntro before any heading")
    table = doc.sections[3]
    assert dict(table.metadata) == {"kind": "table", "table": 1, "caption": "Table 1: fault codes"}
    assert markdown_tables(doc.text[table.start : table.end]) == [
        [["代码", "含义", "处理"], ["E102", "油温过高", "检查风扇"], ["E105", "压力低", "检查风扇"]]
    ]
    assert doc.text.count("Table 1: fault codes") == 1  # a caption, not also a paragraph
    assert doc.stats == {"sections": 4, "tables": 1}


def test_horizontal_merge_and_nested_table(tmp_path):
    d = docx.Document()
    d.add_heading("Specs", level=1)
    t = d.add_table(rows=2, cols=3)
    for j, text in enumerate(["Model", "Range", ""]):
        t.cell(0, j).text = text
    t.cell(0, 1).merge(t.cell(0, 2))
    t.cell(1, 0).text = "HX-200"
    t.cell(1, 1).text = "0-80℃"
    inner = t.cell(1, 2).add_table(rows=2, cols=2)
    for (i, j), text in {(0, 0): "a", (0, 1): "b", (1, 0): "c", (1, 1): "d"}.items():
        inner.cell(i, j).text = text
    path = tmp_path / "specs.docx"
    d.save(path)
    doc = parse_one(path, tmp_path)
    assert doc.title == "Specs" and doc.doc_id == "specs"
    assert markdown_tables(doc.text) == [
        [["Model", "Range", "Range"], ["HX-200", "0-80℃", "a, b; c, d"]]
    ]


def test_core_title_styles_based_on_headings_and_chinese_style_names(tmp_path):
    d = docx.Document()
    from docx.enum.style import WD_STYLE_TYPE

    custom = d.styles.add_style("Chapter", WD_STYLE_TYPE.PARAGRAPH)
    custom.base_style = d.styles["Heading 1"]
    zh = d.styles.add_style("标题 2", WD_STYLE_TYPE.PARAGRAPH)
    assert zh.name == "标题 2"
    d.add_paragraph("Chapter one", style="Chapter")
    d.add_paragraph("小节", style="标题 2")
    d.add_paragraph("body")
    d.core_properties.title = "Core title"
    d.core_properties.comments = "Reviewed, no changes needed."  # prose, not a YAML mapping
    path = tmp_path / "c.docx"
    d.save(path)
    doc = parse_one(path, tmp_path)
    assert doc.title == "Core title"
    assert [s.path for s in doc.sections] == [("Chapter one",), ("Chapter one", "小节")]
    assert doc.metadata["comments"] == "Reviewed, no changes needed."


def test_comments_yaml_doc_id_and_switch(tmp_path):
    d = docx.Document()
    d.add_paragraph("text")
    d.core_properties.identifier = "from-identifier"
    d.core_properties.comments = "doc_id: from-comments\nentities: [HX-200]\nvalid_to: 2025-01-31"
    path = tmp_path / "y.docx"
    d.save(path)
    doc = parse_one(path, tmp_path)
    assert doc.doc_id == "from-comments"  # the comments' keys win over the core properties
    assert doc.metadata["entities"] == ["HX-200"] and doc.metadata["valid_to"] == "2025-01-31"
    assert "doc_id" not in doc.metadata
    off = parse_one(path, tmp_path, comments_metadata=False)
    assert off.doc_id == "from-identifier"
    assert off.metadata["comments"].startswith("doc_id: from-comments")


@pytest.mark.parametrize(
    ("comments", "message"),
    [
        ("valid_from: 2024-13-45", "comments property: malformed YAML"),
        ("valid_from: next year", "valid_from='next year' is not an ISO date"),
    ],
)
def test_bad_dates_in_comments_are_refused(tmp_path, comments, message):
    d = docx.Document()
    d.add_paragraph("text")
    d.core_properties.comments = comments
    path = tmp_path / "bad.docx"
    d.save(path)
    with pytest.raises(DataError, match=message):
        parse_one(path, tmp_path)


def _zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def test_not_a_word_file_is_a_one_line_error(tmp_path):
    good = build_manual(tmp_path / "good.docx")
    with zipfile.ZipFile(good) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    cases = {
        "text.docx": None,
        "other.docx": _zip(tmp_path / "other.docx", {"readme.txt": b"hello"}),
        "nodoc.docx": _zip(
            tmp_path / "nodoc.docx", {k: v for k, v in parts.items() if k != "word/document.xml"}
        ),
        "badxml.docx": _zip(
            tmp_path / "badxml.docx", {**parts, "word/document.xml": b"<w:document"}
        ),
        "truncated.docx": None,
    }
    (tmp_path / "text.docx").write_text("just text, not a zip", encoding="utf-8")
    (tmp_path / "truncated.docx").write_bytes(good.read_bytes()[:2000])
    for name in cases:
        with pytest.raises(DataError) as info:
            parse_one(tmp_path / name, tmp_path)
        message = str(info.value)
        assert message.startswith(f"{tmp_path / name}: not a Word .docx file (")
        assert "\n" not in message
    with pytest.raises(DataError, match=r"nodoc\.docx: .*word/document\.xml"):
        parse_one(tmp_path / "nodoc.docx", tmp_path)


def test_corrupt_word_content_is_a_data_error(tmp_path):
    good = build_manual(tmp_path / "good.docx")
    with zipfile.ZipFile(good) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    body = parts["word/document.xml"].replace(b'<w:pStyle w:val="Heading1"/>', b"<w:pStyle/>")
    assert body != parts["word/document.xml"]
    path = _zip(tmp_path / "corrupt.docx", {**parts, "word/document.xml": body})
    with pytest.raises(DataError, match=r"corrupt\.docx: unreadable Word content \(") as info:
        parse_one(path, tmp_path)
    assert "\n" not in str(info.value)
