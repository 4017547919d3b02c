"""rag_lab.parser.sql_records: SQLite files queried read-only, .sql files run against a URL,
the csv_records field mapping, value conversion, one-line errors without the password."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from rag_lab.errors import ConfigError, DataError
from rag_lab.parser.base import LineLocated
from rag_lab.parser.sql_records import SqlRecordsParser
from rag_lab.pipeline.corpus import parse_corpus
from rag_lab.validate import OptionError

QUERY = (
    "SELECT id, subject, body, resolution, opened, closed_at, cost, site FROM tickets ORDER BY id"
)
FIELDS = {"text_fields": ["body", "resolution"], "title_field": "subject"}


def make_db(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, detect_types=sqlite3.PARSE_DECLTYPES)
    conn.execute(
        "CREATE TABLE tickets (id INTEGER PRIMARY KEY, subject TEXT, body TEXT, resolution TEXT,"
        " opened DATE, closed_at TIMESTAMP, cost REAL, site TEXT, blob BLOB)"
    )
    conn.executemany(
        "INSERT INTO tickets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                1,
                "泵噪音",
                "研磨声来自轴承",
                "更换轴承",
                "2024-01-15",
                "2024-01-16 10:30:00",
                12.5,
                "",
                b"x",
            ),
            (2, "Leak", "Hose leaks", None, "2024-02-01", None, None, "Plant B", None),
        ],
    )
    conn.commit()
    conn.close()
    return path


def test_sqlite_file_rows_become_documents(tmp_path):
    db = make_db(tmp_path / "data" / "tickets.sqlite")
    before = db.read_bytes()
    p = SqlRecordsParser(query=QUERY, **FIELDS)
    assert isinstance(p, LineLocated)
    located = list(p.parse_lines(db, tmp_path))
    assert [n for n, _ in located] == [1, 2]  # result rows
    d1, d2 = (doc for _, doc in located)
    assert (d1.doc_id, d1.title, d1.text) == ("1", "泵噪音", "研磨声来自轴承\n\n更换轴承")
    assert dict(d1.metadata) == {
        "opened": "2024-01-15",
        "closed_at": "2024-01-16 10:30:00",
        "cost": 12.5,
        "source": "data/tickets.sqlite",  # the empty site is left out
    }
    assert (d2.text, dict(d2.metadata)) == (
        "Hose leaks",
        {"opened": "2024-02-01", "site": "Plant B", "source": "data/tickets.sqlite"},
    )
    assert db.read_bytes() == before  # opened read-only


def test_metadata_fields_and_batches(tmp_path):
    db = make_db(tmp_path / "t.db")
    p = SqlRecordsParser(
        query="SELECT * FROM tickets;", metadata_fields=["site"], batch_size=1, **FIELDS
    )
    docs = list(p.parse(db, tmp_path))
    assert [dict(d.metadata) for d in docs] == [
        {"source": "t.db"},
        {"site": "Plant B", "source": "t.db"},
    ]


def test_dates_and_non_json_values(tmp_path):
    db = make_db(tmp_path / "t.sqlite3")
    query = (
        "SELECT id, body, date('2024-03-01') AS day, x'e6b3b5' AS raw, "
        "CAST('1.50' AS NUMERIC) AS num FROM tickets WHERE id = 1"
    )
    (doc,) = SqlRecordsParser(query=query, text_fields=["body"]).parse(db, tmp_path)
    assert dict(doc.metadata) == {
        "day": "2024-03-01",
        "raw": "泵",
        "num": 1.5,
        "source": "t.sqlite3",
    }


def test_sql_file_runs_against_url(tmp_path):
    db = make_db(tmp_path / "store" / "tickets.sqlite")
    sql = tmp_path / "corpus" / "tickets.sql"
    sql.parent.mkdir()
    sql.write_text(QUERY + ";\n", encoding="utf-8")
    p = SqlRecordsParser(url=f"sqlite:///{db}", **FIELDS)
    docs = parse_corpus(p, [sql], tmp_path / "corpus")
    assert [(d.doc_id, d.title) for d in docs] == [("1", "泵噪音"), ("2", "Leak")]
    assert docs[0].metadata["source"] == "tickets.sql"


def test_missing_column_names_it_and_the_columns(tmp_path):
    db = make_db(tmp_path / "t.sqlite")
    p = SqlRecordsParser(query="SELECT id, body FROM tickets", text_fields=["body", "notes"])
    with pytest.raises(
        DataError,
        match=r"t\.sqlite: the query's result: no column 'notes' "
        r"\(text_fields; columns: id, body\)",
    ):
        list(p.parse(db, tmp_path))


def test_empty_id_names_the_row(tmp_path):
    db = make_db(tmp_path / "t.sqlite")
    query = "SELECT CASE id WHEN 2 THEN NULL ELSE id END AS id, body FROM tickets ORDER BY 1 DESC"
    with pytest.raises(DataError, match=r"t\.sqlite: row 2: empty id \(column 'id', id_field\)"):
        list(SqlRecordsParser(query=query, text_fields=["body"]).parse(db, tmp_path))


def test_duplicate_ids_name_the_rows(tmp_path):
    db = make_db(tmp_path / "t.sqlite")
    query = "SELECT 'same' AS id, body FROM tickets"
    with pytest.raises(
        DataError, match=r"t\.sqlite:2: duplicate document id 'same' \(first at .*t\.sqlite:1\)"
    ):
        parse_corpus(SqlRecordsParser(query=query, text_fields=["body"]), [db], tmp_path)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELECT * FROM no_such_table", "no such table: no_such_table"),
        ("SELEC id FROM tickets", "syntax error"),
        ("SELECT 1; SELECT 2", "one statement at a time"),
        ("DELETE FROM tickets", "readonly database"),
        ("CREATE TEMP TABLE x (a)", "returns no rows"),
        ("SELECT id, body, body FROM tickets", "column 'body' twice"),
    ],
)
def test_sql_errors_are_one_line(tmp_path, query, message):
    db = make_db(tmp_path / "t.sqlite")
    with pytest.raises(DataError, match=r"t\.sqlite: ") as info:
        list(SqlRecordsParser(query=query).parse(db, tmp_path))
    assert message in str(info.value) and "\n" not in str(info.value)
    assert "[SQL:" not in str(info.value) and "sqlalche.me" not in str(info.value)


def test_not_a_database_file(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("not sqlite at all " * 100, encoding="utf-8")
    with pytest.raises(DataError, match=r"notes\.db: not a SQLite database"):
        list(SqlRecordsParser(query="SELECT 1").parse(path, tmp_path))


def _sql_file(tmp_path: Path) -> Path:
    sql = tmp_path / "q.sql"
    sql.write_text("SELECT id, text FROM t", encoding="utf-8")
    return sql


@pytest.mark.parametrize(
    ("url", "message"),
    [
        # no driver for it here (psycopg, pymysql are not dependencies): still a one-line error
        ("postgresql+psycopg://u:secret@127.0.0.1:1/x", "database driver not installed"),
        ("mysql+pymysql://u:secret@127.0.0.1:1/x", "database driver not installed"),
        ("nosuchdialect://u:secret@127.0.0.1:1/x", "database driver not installed"),
        # a database that cannot be reached
        ("sqlite:////nonexistent/dir/tickets.db", "no such database file"),
    ],
)
def test_unreachable_url_is_a_quick_one_line_error_without_the_password(tmp_path, url, message):
    start = time.monotonic()
    with pytest.raises(DataError, match=r"q\.sql: cannot read from ") as info:
        list(SqlRecordsParser(url=url).parse(_sql_file(tmp_path), tmp_path))
    text = str(info.value)
    assert message in text and "secret" not in text and "\n" not in text
    if "secret" in url:
        assert "u:***@127.0.0.1:1/x" in text
    assert time.monotonic() - start < 5


def test_driver_error_through_url(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_text("not sqlite at all " * 100, encoding="utf-8")
    with pytest.raises(DataError, match=r"q\.sql: cannot read from sqlite:///.*junk\.db: ") as info:
        list(SqlRecordsParser(url=f"sqlite:///{junk}").parse(_sql_file(tmp_path), tmp_path))
    assert "not a database" in str(info.value) and "\n" not in str(info.value)


def test_configuration_errors(tmp_path):
    db = make_db(tmp_path / "t.sqlite")
    with pytest.raises(ConfigError, match=r"t\.sqlite: a SQLite file needs the parser's query"):
        list(SqlRecordsParser().parse(db, tmp_path))
    sql = _sql_file(tmp_path)
    with pytest.raises(
        ConfigError, match=r"q\.sql: a \.sql file's query needs the parser's url"
    ) as info:
        list(SqlRecordsParser().parse(sql, tmp_path))
    assert "url: ${oc.env:TICKETS_DB_URL})" in str(info.value)
    with pytest.raises(
        ConfigError, match=r"q\.sql: the parser's url is not a SQLAlchemy URL"
    ) as info:
        list(SqlRecordsParser(url="secret garbage").parse(sql, tmp_path))
    assert "secret" not in str(info.value)
    empty = tmp_path / "empty.sql"
    empty.write_text(" ;\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty\.sql: no query"):
        list(SqlRecordsParser(url=f"sqlite:///{db}").parse(empty, tmp_path))


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"text_fields": "body"}, "text_fields"),
        ({"metadata_fields": "site"}, "metadata_fields"),
        ({"query": "  "}, "query"),
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"batch_size": 1.5}, "batch_size"),
    ],
)
def test_options_are_checked(kw, name):
    with pytest.raises(OptionError, match=name):
        SqlRecordsParser(**kw)


def test_driver_values_become_json_metadata():
    import datetime as dt
    import uuid
    from decimal import Decimal

    from rag_lab.parser._records import json_value

    uid = uuid.UUID(int=1)
    values = {
        "day": dt.date(2024, 1, 15),
        "at": dt.datetime(2024, 1, 15, 8, 30, tzinfo=dt.timezone.utc),
        "amount": Decimal("12.50"),
        "raw": "泵".encode(),
        "uid": uid,
        "nan": float("nan"),
        "tags": ("a", dt.date(2024, 2, 1)),
        "doc": {"k": Decimal("1")},
        "n": 3,
        "flag": True,
    }
    assert json_value(values) == {
        "day": "2024-01-15",
        "at": "2024-01-15T08:30:00+00:00",
        "amount": "12.50",
        "raw": "泵",
        "uid": str(uid),
        "nan": "nan",
        "tags": ["a", "2024-02-01"],
        "doc": {"k": "1"},
        "n": 3,
        "flag": True,
    }


def test_url_env_keeps_the_url_out_of_the_config(tmp_path, monkeypatch):
    import sqlite3

    db = tmp_path / "tickets.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (id TEXT, text TEXT)")
    con.execute("INSERT INTO t VALUES ('T-1', 'E102 油温过高，清洗散热片')")
    con.commit()
    con.close()
    (tmp_path / "tickets.sql").write_text("SELECT id, text FROM t")
    monkeypatch.setenv("TICKETS_DB_URL", f"sqlite:///{db}")
    from rag_lab.parser.sql_records import SqlRecordsParser

    parser = SqlRecordsParser(url_env="TICKETS_DB_URL", snapshot="2024-06-30")
    (doc,) = list(parser.parse(tmp_path / "tickets.sql", tmp_path))
    assert doc.doc_id == "T-1" and "油温过高" in doc.text
    from rag_lab.validate import OptionError

    with pytest.raises(OptionError, match="no such environment variable"):
        SqlRecordsParser(url_env="NOT_SET_ANYWHERE_42")
    with pytest.raises(OptionError, match="not both"):
        SqlRecordsParser(url="sqlite://", url_env="TICKETS_DB_URL")
