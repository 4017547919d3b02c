"""rag_lab.parser.csv_records: one document per row, configured columns, file:line locations
(also for multi-line cells), cells kept as strings, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.errors import DataError
from rag_lab.parser.base import LineLocated
from rag_lab.parser.csv_records import CsvRecordsParser
from rag_lab.pipeline.corpus import parse_corpus
from rag_lab.validate import OptionError

TICKETS = (
    "ticket,subject,body,resolution,priority,opened,site\n"
    'T-001,泵噪音,"研磨声, 来自轴承",更换轴承,02,2024-01-15,Plant A\n'
    "\n"
    'T-002,Leak,"Hose leaks\r\nat the fitting",,1,2024-02-01,\n'
    "T-003,Only subject,,,3,,Plant B\n"
)


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding=encoding, newline="") as fh:
        fh.write(text)
    return path


def parser(**kw) -> CsvRecordsParser:
    args = {
        "id_field": "ticket",
        "text_fields": ["body", "resolution"],
        "title_field": "subject",
    }
    return CsvRecordsParser(**{**args, **kw})


def test_rows_become_documents_with_lines(tmp_path):
    path = write(tmp_path / "exports" / "tickets.csv", TICKETS)
    p = parser()
    assert isinstance(p, LineLocated)
    located = list(p.parse_lines(path, tmp_path))
    assert [line for line, _ in located] == [2, 4, 6]  # the line where each row starts
    d1, d2, d3 = (doc for _, doc in located)
    assert (d1.doc_id, d1.title, d1.text) == ("T-001", "泵噪音", "研磨声, 来自轴承\n\n更换轴承")
    assert dict(d1.metadata) == {
        "priority": "02",  # cells stay strings: leading zeros kept
        "opened": "2024-01-15",
        "site": "Plant A",
        "source": "exports/tickets.csv",
    }
    assert d2.text == "Hose leaks\nat the fitting"  # multi-line cell, CRLF normalised
    assert dict(d2.metadata) == {
        "priority": "1",
        "opened": "2024-02-01",
        "source": "exports/tickets.csv",
    }
    assert d3.text == "" and d3.title == "Only subject"
    assert [d.doc_id for d in p.parse(path, tmp_path)] == ["T-001", "T-002", "T-003"]


def test_metadata_fields_tsv_bom_and_short_rows(tmp_path):
    text = "\ufeffid\ttext\tlang\tnote\n a1 \tfirst\ten\n"  # BOM; row missing its last cell
    path = write(tmp_path / "r.tsv", text)
    (doc,) = CsvRecordsParser(metadata_fields=["lang", "note"]).parse(path, tmp_path)
    assert doc.doc_id == "a1" and doc.text == "first"
    assert dict(doc.metadata) == {"lang": "en", "source": "r.tsv"}
    semi = write(tmp_path / "s.csv", "id;text\nx;semi\n")
    (doc,) = CsvRecordsParser(delimiter=";").parse(semi, tmp_path)
    assert (doc.doc_id, doc.text) == ("x", "semi")


def test_parse_corpus_names_duplicate_rows_by_line(tmp_path):
    path = write(tmp_path / "d.csv", 'id,text\na,"one\ntwo"\nb,x\na,y\n')
    with pytest.raises(
        DataError, match=r"d\.csv:5: duplicate document id 'a' \(first at .*d\.csv:2\)"
    ):
        parse_corpus(CsvRecordsParser(), [path], tmp_path)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (
            {"text_fields": ["body", "notes"]},
            r"no column 'notes' \(text_fields; columns: ticket, subject",
        ),
        ({"id_field": "id"}, r"no column 'id' \(id_field; "),
        ({"title_field": "heading"}, r"no column 'heading' \(title_field; "),
        ({"metadata_fields": ["owner"]}, r"no column 'owner' \(metadata_fields; "),
    ],
)
def test_missing_configured_column_names_option_and_columns(tmp_path, kw, message):
    path = write(tmp_path / "t.csv", TICKETS)
    with pytest.raises(DataError, match=r"t\.csv:1: " + message):
        list(parser(**kw).parse(path, tmp_path))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id,text\na,x\n  ,y\n", r"e\.csv:3: empty id \(column 'id', id_field\)"),
        (
            'id,text\na,x\nb,"never closed\nc,z\n',
            r"e\.csv:3: malformed CSV \(unexpected end of data\)",
        ),
        ('id,text\na,"x"y\n', r"e\.csv:2: malformed CSV"),
        ("id,text\na,x,extra\n", r"e\.csv:2: row has 3 cells, the header 2"),
        ("id,text,id\na,x,b\n", r"e\.csv:1: column 'id' appears twice"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path, text, message):
    path = write(tmp_path / "e.csv", text)
    with pytest.raises(DataError, match=message) as info:
        list(CsvRecordsParser().parse(path, tmp_path))
    assert "\n" not in str(info.value)


def test_encoding(tmp_path):
    gbk = write(tmp_path / "g.csv", "id,text\na,油温过高\n", encoding="gbk")
    with pytest.raises(DataError, match=r"g\.csv:2: not UTF-8 text .*iconv -f gbk"):
        list(CsvRecordsParser().parse(gbk, tmp_path))
    (doc,) = CsvRecordsParser(encoding="gbk").parse(gbk, tmp_path)
    assert doc.text == "油温过高"
    latin = write(tmp_path / "l.csv", "id,text\na,caf\xe9\n", encoding="latin-1")
    with pytest.raises(DataError, match=r"l\.csv: not ascii text"):
        list(CsvRecordsParser(encoding="ascii").parse(latin, tmp_path))


def test_long_cell_is_read(tmp_path):
    body = "x" * 300_000  # over csv's default field limit (128 KiB)
    (doc,) = CsvRecordsParser().parse(write(tmp_path / "big.csv", f"id,text\na,{body}\n"), tmp_path)
    assert len(doc.text) == 300_000


def test_header_only_gives_no_documents(tmp_path):
    path = write(tmp_path / "h.csv", "id,text\n")
    assert list(CsvRecordsParser().parse(path, tmp_path)) == []
    with pytest.raises(DataError, match=r"h\.csv: no records"):
        parse_corpus(CsvRecordsParser(), [path], tmp_path)


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"text_fields": "body"}, "text_fields"),
        ({"text_fields": []}, "text_fields"),
        ({"metadata_fields": "site"}, "metadata_fields"),
        ({"delimiter": ",,"}, "delimiter"),
        ({"encoding": "no-such-codec"}, "encoding"),
    ],
)
def test_options_are_checked(kw, name):
    with pytest.raises(OptionError, match=name):
        CsvRecordsParser(**kw)
