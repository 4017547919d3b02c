"""SQL query results (ticket systems, CMS tables): one document per row, columns configurable."""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.errors import ConfigError, DataError
from rag_lab.io.files import read_text
from rag_lab.parser._records import FieldMap, is_empty, json_value, source_of
from rag_lab.types import Document
from rag_lab.validate import OptionError, integer

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Engine

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
_SQLITE_MAGIC = b"SQLite format 3\x00"
QUERY_SUFFIX = ".sql"

# the connect-timeout argument of each DBAPI driver that has one (seconds); others get none
_TIMEOUT_ARG = {
    "psycopg": "connect_timeout",
    "psycopg2": "connect_timeout",
    "pg8000": "timeout",
    "pymysql": "connect_timeout",
    "mysqldb": "connect_timeout",
    "mysqlconnector": "connection_timeout",
    "pyodbc": "timeout",
    "pymssql": "login_timeout",
    "oracledb": "tcp_connect_timeout",
    "pysqlite": "timeout",  # how long to wait for a locked database
}


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _check_sqlite_header(path: Path) -> None:
    """A file that is not a SQLite database is refused up front: SQLite only notices when a
    query reads a table (``SELECT 1`` would succeed on any file)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if head and head != _SQLITE_MAGIC:  # an empty file is an empty database
        raise DataError(f"{path}: not a SQLite database (no SQLite header)")


class SqlRecordsParser:
    """Args:
    id_field: result column holding the document id (an empty or NULL id is an error).
    text_fields: columns joined (blank line between) into the document text; NULL and empty
        values are skipped.
    title_field: column holding the title (optional).
    metadata_fields: columns kept as metadata; ``null`` = every column not used above.
    query: the SQL run against a SQLite file (``.sqlite``, ``.sqlite3``, ``.db``); required
        for those files.
    url: the SQLAlchemy URL (``postgresql+psycopg://user:pw@host/db``, usually
        ``${oc.env:TICKETS_DB_URL}``) that a ``.sql`` file's query runs against; required for
        ``.sql`` files.
    connect_timeout: seconds a connection attempt may take (passed to drivers that take one),
        so an unreachable server fails quickly.
    batch_size: rows fetched at a time (rows are streamed, never all loaded at once).
    url_env: the name of an environment variable holding the URL, instead of ``url``: the URL
        (and its password) then reaches no config file, run folder or MLflow param (a resolved
        ``${oc.env:...}`` in ``url`` does).
    snapshot: any string that names the state of the database (an export date, a migration
        id). The stage cache keys a ``.sql`` file on its query text and these options, not on the
        rows, so a changed database is read again only when ``snapshot`` changes (or with
        ``cache.dir=null``).

    Two kinds of file: a SQLite database (opened read-only; ``query`` runs against it), or a
    ``.sql`` file holding the query (it runs against ``url``). The query is sent to the database
    as written (no bind parameters: ``:name`` and ``%`` mean what they mean to the database);
    a trailing ``;`` is allowed, a second statement is not. Values become metadata as JSON:
    dates and datetimes as ISO strings, numbers as numbers, ``Decimal`` and other non-JSON values
    as strings; NULLs and empty strings are left out. Any failure to read (unreachable server,
    bad credentials, driver not installed, SQL error) is a one-line ``DataError`` naming the
    file and the URL with its password hidden.
    """

    suffixes = (*SQLITE_SUFFIXES, QUERY_SUFFIX)

    def __init__(
        self,
        id_field: str = "id",
        text_fields: Sequence[str] = ("text",),
        title_field: str | None = None,
        metadata_fields: Sequence[str] | None = None,
        query: str | None = None,
        url: str | None = None,
        connect_timeout: int = 10,
        batch_size: int = 1000,
        url_env: str | None = None,
        snapshot: str | None = None,
    ) -> None:
        if query is not None and (not isinstance(query, str) or not query.strip()):
            raise OptionError("query", query, "must be an SQL query (or null)")
        if url is not None and (not isinstance(url, str) or not url.strip()):
            raise OptionError("url", "***", "must be a SQLAlchemy URL (or null)")
        self.fields = FieldMap.from_options(id_field, text_fields, title_field, metadata_fields)
        if url_env is not None:
            if url is not None:
                raise OptionError("url_env", url_env, "set url or url_env, not both")
            name = str(url_env)
            if name not in os.environ:
                raise OptionError("url_env", name, "no such environment variable")
            url = os.environ[name]
        self.query = query
        self.url = url
        self.snapshot = snapshot
        self.connect_timeout = integer(connect_timeout, "connect_timeout", gt=0)
        self.batch_size = integer(batch_size, "batch_size", gt=0)

    def unread(self, path: Path) -> str | None:
        """A SQLite file while ``query`` is unset is not read (``Selective``): in a corpus read
        by the auto parser it is left out and counted, not an error (``parse`` refuses it)."""
        if path.suffix.lower() in SQLITE_SUFFIXES and not self.query:
            return "a SQLite database: no query set to run on it"
        return None

    def parse(self, path: Path, root: Path) -> Iterator[Document]:
        for _, doc in self.parse_lines(path, root):
            yield doc

    def parse_lines(self, path: Path, root: Path) -> Iterator[tuple[int | None, Document]]:
        """``(row, document)`` per result row (``rag_lab.parser.base.LineLocated``): the number
        is the 1-based row of the query's result, not a file line, so ``file:3`` names the
        third row.

        Refused: ``query`` unset for a SQLite file, ``url`` unset for a ``.sql`` file
        (``ConfigError``); an empty ``.sql`` file, a result without a configured column (the
        column and the columns there are named), an empty id, any failure to read
        (``DataError``)."""
        from sqlalchemy.exc import SQLAlchemyError

        engine, shown, query = self._engine(path)
        source = source_of(path, root)
        try:
            with engine.connect() as conn:
                result = conn.execution_options(stream_results=True).exec_driver_sql(query)
                if not result.returns_rows:
                    raise DataError(
                        f"{path}: the query returns no rows to read from {shown} "
                        "(it must be a SELECT)"
                    )
                columns = [str(c) for c in result.keys()]
                twice = sorted({c for c in columns if columns.count(c) > 1})
                if twice:
                    raise DataError(
                        f"{path}: the query's result has column {twice[0]!r} twice "
                        "(give one an alias: AS ...)"
                    )
                self.fields.require_columns(columns, f"{path}: the query's result", "column")
                n = 0
                while batch := result.fetchmany(self.batch_size):
                    for row in batch:
                        n += 1
                        yield n, self._document(dict(zip(columns, row)), path, n, source)
        except (SQLAlchemyError, sqlite3.Error) as exc:
            raise self._cannot_read(path, shown, exc) from None
        finally:
            engine.dispose()

    def _document(self, raw: Mapping[str, Any], path: Path, n: int, source: str) -> Document:
        rec = {k: json_value(v) for k, v in raw.items()}
        doc_id = rec.get(self.fields.id_field)
        if is_empty(doc_id):
            raise DataError(
                f"{path}: row {n}: empty id (column {self.fields.id_field!r}, id_field)"
            )
        return self.fields.document(str(doc_id).strip(), rec, source)

    def _engine(self, path: Path) -> tuple[Engine, str, str]:
        """``(engine, the URL as shown in errors, query)`` for ``path``."""
        from sqlalchemy import create_engine
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError
        from sqlalchemy.pool import NullPool

        if path.suffix.lower() == QUERY_SUFFIX:
            if not self.url:
                raise ConfigError(
                    f"{path}: a .sql file's query needs the parser's url option "
                    "(a SQLAlchemy URL, e.g. url: ${oc.env:TICKETS_DB_URL})"
                )
            query = read_text(path).strip()
            if not query.rstrip(";").strip():
                raise DataError(f"{path}: no query in the .sql file")
            url = self._url(path)
            shown = url.render_as_string(hide_password=True)
            self._check_sqlite_file(url, path, shown)
            try:
                timeout = _TIMEOUT_ARG.get(url.get_driver_name())  # loads the dialect
                connect_args = {timeout: self.connect_timeout} if timeout else {}
                engine = create_engine(url, poolclass=NullPool, connect_args=connect_args)
            except (ImportError, NoSuchModuleError) as exc:
                raise DataError(
                    f"{path}: cannot read from {shown}: database driver not installed "
                    f"({_one_line(exc)})"
                ) from None
            except (ArgumentError, TypeError, ValueError) as exc:
                raise DataError(f"{path}: cannot read from {shown}: {_one_line(exc)}") from None
            return engine, shown, query
        if not self.query:
            raise ConfigError(
                f"{path}: a SQLite file needs the parser's query option (the SQL to run on it)"
            )
        _check_sqlite_header(path)
        # read-only through a file: URI built here, not a sqlite:/// URL: SQLAlchemy's URL
        # parsing would mangle a path with "?", "#" or "%" (and a bad path would create a file)
        uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
        busy_timeout = self.connect_timeout

        def connect() -> sqlite3.Connection:
            return sqlite3.connect(uri, uri=True, timeout=busy_timeout)

        engine = create_engine("sqlite://", poolclass=NullPool, creator=connect)
        return engine, f"sqlite:///{path}", self.query

    def _url(self, path: Path) -> URL:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            return make_url(str(self.url).strip())
        except (ArgumentError, ValueError, TypeError):
            # the URL itself is not shown: it may hold a password
            raise ConfigError(
                f"{path}: the parser's url is not a SQLAlchemy URL "
                "(dialect+driver://user:password@host:port/database)"
            ) from None

    @staticmethod
    def _check_sqlite_file(url: URL, path: Path, shown: str) -> None:
        """A ``sqlite:///`` URL naming a file that does not exist: refused, since SQLite would
        create an empty database there and the query would fail with a puzzling "no such
        table"."""
        if url.get_backend_name() != "sqlite":
            return
        db = url.database or ""
        if db and db != ":memory:" and not db.startswith("file:") and not Path(db).is_file():
            raise DataError(f"{path}: cannot read from {shown}: no such database file")

    def _cannot_read(self, path: Path, shown: str, exc: BaseException) -> DataError:
        orig = getattr(exc, "orig", None)  # the driver's own error, without SQLAlchemy's notes
        reason = _one_line(orig if orig is not None else exc)
        password = self._password()
        if password:
            reason = reason.replace(password, "***")
        return DataError(f"{path}: cannot read from {shown}: {reason or type(exc).__name__}")

    def _password(self) -> str | None:
        if not self.url:
            return None
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            return make_url(str(self.url).strip()).password
        except (ArgumentError, ValueError, TypeError):
            return None
