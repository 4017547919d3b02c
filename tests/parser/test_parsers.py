"""rag_lab.parser: Markdown (front matter, heading sections), JSONL records, plain text, AutoParser
and parse_corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_lab.errors import DataError
from rag_lab.parser import (
    AutoParser,
    BeirCorpusParser,
    JsonlRecordsParser,
    MarkdownParser,
    PlainTextParser,
)
from rag_lab.parser.markdown import heading_sections
from rag_lab.pipeline.corpus import parse_corpus

MD = """---
doc_id: hx200-manual
title: HX-200 Service Manual
doc_type: manual
valid_from: 2024-01-15
versions: [2023-06-01, 2024-01-15]
entities: [HX-200, E102]
---
Intro text before any heading.

# HX-200

Overview of the unit.

## E102 油温过高

Fault E102 means the oil is too hot.

```bash
# not a heading: a shell comment
echo done
```

### Causes

Cooling fan failure.

## E105

Low pressure.
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def parse_one(parser, path: Path, root: Path):
    docs = list(parser.parse(path, root))
    assert len(docs) == 1
    return docs[0]


# --- Markdown ------------------------------------------------------------------------------------


def test_markdown_front_matter_becomes_metadata(tmp_path):
    path = write(tmp_path / "manuals" / "hx200.md", MD)
    doc = parse_one(MarkdownParser(), path, tmp_path)
    assert doc.doc_id == "hx200-manual"
    assert doc.title == "HX-200 Service Manual"
    assert dict(doc.metadata) == {
        "doc_type": "manual",
        "valid_from": "2024-01-15",
        "versions": ["2023-06-01", "2024-01-15"],
        "entities": ["HX-200", "E102"],
        "source": "manuals/hx200.md",
    }
    assert "doc_id" not in doc.metadata and "title" not in doc.metadata
    assert doc.text.startswith("Intro text") and "---" not in doc.text  # front matter stripped


def test_markdown_heading_sections_with_paths(tmp_path):
    doc = parse_one(MarkdownParser(), write(tmp_path / "m.md", MD), tmp_path)
    paths = [s.path for s in doc.sections]
    assert paths == [
        (),
        ("HX-200",),
        ("HX-200", "E102 油温过高"),
        ("HX-200", "E102 油温过高", "Causes"),
        ("HX-200", "E105"),
    ]
    # sections tile the body in order, each starting at its heading
    assert doc.sections[0].start == 0
    for a, b in zip(doc.sections, doc.sections[1:], strict=False):
        assert a.end == b.start
    assert doc.sections[-1].end == len(doc.text)
    for sec in doc.sections[1:]:
        assert doc.text[sec.start :].startswith("#" * len(sec.path) + " " + sec.path[-1])
    assert doc.sections[3].title == "HX-200 > E102 油温过高 > Causes"
    # the shell comment inside the fence is not a heading; it belongs to the E102 section
    comment = doc.text.index("# not a heading")
    assert doc.section_at(comment).path == ("HX-200", "E102 油温过高")


def test_hash_inside_code_fence_is_not_a_heading():
    body = "# Real\n\n~~~\n# fake\n~~~\n\n```python\n## also fake\n```\ntext\n"
    assert [s.path for s in heading_sections(body)] == [("Real",)]


def test_markdown_without_front_matter_uses_path_and_h1(tmp_path):
    path = write(tmp_path / "sub" / "notes.md", "# Pump notes\n\nbody\n")
    doc = parse_one(MarkdownParser(), path, tmp_path)
    assert doc.doc_id == "sub/notes" and doc.title == "Pump notes"
    assert dict(doc.metadata) == {"source": "sub/notes.md"}
    doc = parse_one(MarkdownParser(), write(tmp_path / "plain.md", "no heading here\n"), tmp_path)
    assert doc.title == "plain" and doc.sections == ()


def test_markdown_crlf_is_normalised(tmp_path):
    path = tmp_path / "w.md"
    path.write_bytes(b"---\r\ntitle: T\r\n---\r\n# A\r\n\r\nbody\r\n")
    doc = parse_one(MarkdownParser(), path, tmp_path)
    assert doc.title == "T" and "\r" not in doc.text and doc.sections[0].path == ("A",)


def test_malformed_front_matter_names_the_file(tmp_path):
    path = write(tmp_path / "bad.md", "---\ntitle: x\nentities: [unclosed\n---\nbody\n")
    with pytest.raises(DataError, match=r"bad\.md.*front matter"):
        list(MarkdownParser().parse(path, tmp_path))
    path = write(tmp_path / "list.md", "---\n- a\n- b\n---\nbody\n")
    with pytest.raises(DataError, match=r"list\.md.*mapping"):
        list(MarkdownParser().parse(path, tmp_path))


def test_heading_ending_in_hash_keeps_it():
    assert [s.path for s in heading_sections("## Using C#\n\ntext\n")] == [("Using C#",)]


def test_heading_closing_sequence_is_stripped():
    assert [s.path for s in heading_sections("## E102 ##\n\ntext\n")] == [("E102",)]


# --- JSONL records -------------------------------------------------------------------------------


def test_jsonl_records_extra_fields_become_metadata(tmp_path):
    rows = [
        {
            "ticket": "T-1",
            "subject": "Pump noise",
            "body": "Grinding noise",
            "notes": "bearing",
            "priority": 2,
            "site": "Plant A",
            "metadata": {"language": "en"},
        },
        {"ticket": "T-2", "subject": "Leak", "notes": "hose"},
    ]
    path = write(tmp_path / "tickets.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    parser = JsonlRecordsParser(
        id_field="ticket", text_fields=("body", "notes"), title_field="subject"
    )
    d1, d2 = parser.parse(path, tmp_path)
    assert (d1.doc_id, d1.title, d1.text) == ("T-1", "Pump noise", "Grinding noise\n\nbearing")
    assert dict(d1.metadata) == {
        "priority": 2,
        "site": "Plant A",
        "language": "en",
        "source": "tickets.jsonl",
    }
    assert d2.text == "hose"  # missing text fields are skipped
    no_extra = JsonlRecordsParser(
        id_field="ticket", text_fields=("body",), extra_fields_as_metadata=False
    )
    d = next(iter(no_extra.parse(path, tmp_path)))
    assert dict(d.metadata) == {"language": "en", "source": "tickets.jsonl"}


def test_jsonl_malformed_line_names_file_and_line(tmp_path):
    path = write(tmp_path / "c.jsonl", '{"_id": "a", "text": "x"}\n\n{"_id": "b", "text": \n')
    with pytest.raises(DataError, match=r"c\.jsonl:3: malformed JSON"):
        list(JsonlRecordsParser().parse(path, tmp_path))
    path = write(tmp_path / "arr.jsonl", '["not", "an", "object"]\n')
    with pytest.raises(DataError, match=r"arr\.jsonl:1: expected a JSON object"):
        list(JsonlRecordsParser().parse(path, tmp_path))


def test_jsonl_missing_id_names_key_and_line(tmp_path):
    path = write(tmp_path / "c.jsonl", '{"_id": "a", "text": "x"}\n{"id": "b", "text": "y"}\n')
    with pytest.raises(DataError, match=r"c\.jsonl:2: missing required key '_id'"):
        list(BeirCorpusParser().parse(path, tmp_path))


def test_jsonl_record_without_text_and_bad_metadata(tmp_path):
    path = write(tmp_path / "c.jsonl", '{"_id": "a", "title": "only a title"}\n')
    with pytest.raises(DataError, match=r"c\.jsonl:1: record 'a' has none of the text fields"):
        list(BeirCorpusParser().parse(path, tmp_path))
    path = write(tmp_path / "m.jsonl", '{"_id": "a", "text": "x", "metadata": [1]}\n')
    with pytest.raises(DataError, match=r"m\.jsonl:1: 'metadata' must be an object"):
        list(BeirCorpusParser().parse(path, tmp_path))


def test_beir_corpus_parser_keeps_only_metadata_object(toy_path):
    docs = list(BeirCorpusParser().parse(toy_path / "corpus.jsonl", toy_path))
    assert [d.doc_id for d in docs] == [f"d{i}" for i in range(1, 9)]
    assert docs[0].title == "HX-200 overheating"
    assert dict(docs[0].metadata) == {"doc_type": "manual", "source": "corpus.jsonl"}


# --- plain text, AutoParser, parse_corpus ---------------------------------------------------------


def test_plain_text_id_is_relative_path(tmp_path):
    path = write(tmp_path / "logs" / "2024" / "shift.txt", "Pump restarted.\n")
    doc = parse_one(PlainTextParser(), path, tmp_path)
    assert doc.doc_id == "logs/2024/shift"
    assert doc.title == "shift" and doc.text == "Pump restarted.\n"
    assert dict(doc.metadata) == {"source": "logs/2024/shift.txt"}


def test_plain_text_not_utf8(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("caf\xe9".encode("latin-1"))
    # the likely encoding is named (was "iconv -f <its encoding>"); random bytes name none
    named = r"latin1\.txt:1: not UTF-8 .*, likely cp1252 .*iconv -f cp1252"
    with pytest.raises(DataError, match=named):
        list(PlainTextParser().parse(path, tmp_path))
    path.write_bytes(bytes(range(128, 256)) * 4)
    with pytest.raises(DataError, match=r"latin1\.txt:1: not UTF-8 .*iconv -f <its encoding>"):
        list(PlainTextParser().parse(path, tmp_path))


def test_auto_parser_dispatches_by_suffix(tmp_path):
    md = write(tmp_path / "a.MD", "# Title A\n\nmd body\n")
    txt = write(tmp_path / "b.txt", "text body\n")
    jl = write(tmp_path / "c.jsonl", '{"_id": "rec1", "text": "record body"}\n')
    other = write(tmp_path / "d.csv", "x,y\n")
    auto = AutoParser(
        {".md": MarkdownParser(), "txt": PlainTextParser(), ".jsonl": JsonlRecordsParser()}
    )
    assert set(auto.suffixes) == {".md", ".txt", ".jsonl"}
    docs = parse_corpus(auto, [md, txt, jl, other], tmp_path)
    assert [(d.doc_id, d.title) for d in docs] == [("a", "Title A"), ("b", "b"), ("rec1", "")]
    assert docs[0].sections[0].path == ("Title A",)  # the Markdown parser did it


def test_parse_corpus_refuses_duplicate_ids_naming_both_files(tmp_path):
    first = write(tmp_path / "one.jsonl", '{"_id": "x", "text": "a"}\n')
    second = write(tmp_path / "two.jsonl", '{"_id": "y", "text": "b"}\n{"_id": "x", "text": "c"}\n')
    with pytest.raises(DataError, match="duplicate document id 'x'") as exc:
        parse_corpus(JsonlRecordsParser(), [first, second], tmp_path)
    assert str(first) in str(exc.value) and str(second) in str(exc.value)


def test_parse_corpus_refuses_empty_corpora(tmp_path):
    with pytest.raises(DataError, match="empty corpus.*no files"):
        parse_corpus(PlainTextParser(), [], tmp_path)
    other = write(tmp_path / "x.csv", "a,b\n")
    with pytest.raises(DataError, match=r"empty corpus.*1 files.*\.txt"):
        parse_corpus(PlainTextParser(), [other], tmp_path)
    blank = write(tmp_path / "blank.txt", "  \n\n")
    with pytest.raises(DataError, match=r"blank\.txt: document 'blank' has empty text"):
        parse_corpus(PlainTextParser(), [blank], tmp_path, on_empty="fail")
    with pytest.raises(DataError, match=r"all 1 documents have empty text \(e\.g\. 'blank' at"):
        parse_corpus(PlainTextParser(), [blank], tmp_path)  # skipped, and then nothing is left
