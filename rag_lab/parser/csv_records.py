"""CSV / TSV records (ticket exports, spreadsheets): one document per row, columns configurable."""

from __future__ import annotations

import codecs
import csv
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from rag_lab.errors import DataError
from rag_lab.io.files import not_utf8
from rag_lab.parser._records import FieldMap, source_of
from rag_lab.types import Document
from rag_lab.validate import OptionError

# csv's default field limit (128 KiB) refuses a long article in one cell; raised once, for all
_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)
_DEFAULT_DELIMITERS = {".csv": ",", ".tsv": "\t"}


class CsvRecordsParser:
    """Args:
    id_field: column holding the document id (surrounding spaces stripped; an empty id is an
        error naming ``file:line``).
    text_fields: columns joined (blank line between) into the document text; empty cells are
        skipped.
    title_field: column holding the title (optional).
    metadata_fields: columns kept as metadata; ``null`` = every column not used above.
    delimiter: one character; ``null`` = ``,`` for ``.csv`` and a tab for ``.tsv``.
    encoding: the files' text encoding (``utf-8-sig``: UTF-8, a BOM as Excel writes it
        accepted).

    The first non-blank row is the header (names stripped of surrounding spaces). Every cell is
    kept as the string it is in the file: ``007`` stays ``"007"``, ``2024-01-15`` stays the ISO
    string, so ids and codes keep their leading zeros; empty cells are left out of the metadata.
    A row shorter than the header has empty cells at the end (spreadsheets drop trailing empty
    cells); a longer one is an error (usually an unquoted delimiter). Quoted cells may span
    lines; line endings inside them become ``\\n``. Columns with an empty header name are
    ignored.
    """

    suffixes = (".csv", ".tsv")
    plain = True  # parsed each time, not cached per file (rag_lab.parser.base.Plain)

    def __init__(
        self,
        id_field: str = "id",
        text_fields: Sequence[str] = ("text",),
        title_field: str | None = None,
        metadata_fields: Sequence[str] | None = None,
        delimiter: str | None = None,
        encoding: str = "utf-8-sig",
    ) -> None:
        if delimiter is not None and (not isinstance(delimiter, str) or len(delimiter) != 1):
            raise OptionError("delimiter", delimiter, "must be one character (or null)")
        try:
            codecs.lookup(encoding)
        except (LookupError, TypeError):
            raise OptionError("encoding", encoding, "unknown text encoding") from None
        self.fields = FieldMap.from_options(id_field, text_fields, title_field, metadata_fields)
        self.delimiter = delimiter
        self.encoding = encoding

    def parse(self, path: Path, root: Path) -> Iterator[Document]:
        for _, doc in self.parse_lines(path, root):
            yield doc

    def parse_lines(self, path: Path, root: Path) -> Iterator[tuple[int | None, Document]]:
        """``(line, document)`` per row (``rag_lab.parser.base.LineLocated``): ``line`` is the
        file line where the row starts, also for rows with multi-line quoted cells.

        Refused (``DataError``): a header without a configured column (the option and the
        columns named), a header naming a column twice, an empty id, a row with more cells than
        the header, malformed quoting (``file:line``), text not in ``encoding``."""
        delimiter = self.delimiter or _DEFAULT_DELIMITERS.get(path.suffix.lower(), ",")
        source = source_of(path, root)
        if csv.field_size_limit() < _FIELD_LIMIT:
            csv.field_size_limit(_FIELD_LIMIT)
        try:
            with open(path, encoding=self.encoding, newline="") as fh:
                yield from self._rows(fh, path, delimiter, source)
        except UnicodeDecodeError as exc:
            if codecs.lookup(self.encoding).name in ("utf-8", "utf-8-sig"):
                raise not_utf8(path) from None
            raise DataError(
                f"{path}: not {self.encoding} text (byte 0x{exc.object[exc.start]:02x}); "
                "set the parser's encoding option"
            ) from None

    def _rows(
        self, fh: Iterator[str], path: Path, delimiter: str, source: str
    ) -> Iterator[tuple[int | None, Document]]:
        reader = csv.reader(fh, delimiter=delimiter, strict=True)
        header: list[str] | None = None
        end = 0  # the last file line the reader has consumed
        while True:
            start = end + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise DataError(f"{path}:{start}: malformed CSV ({exc})") from None
            end = reader.line_num
            if not any(cell.strip() for cell in row):
                continue  # blank line (or a row of empty cells)
            if header is None:
                header = self._header(row, path, start)
                continue
            if len(row) > len(header):
                raise DataError(
                    f"{path}:{start}: row has {len(row)} cells, the header {len(header)} "
                    "(an unquoted delimiter inside a cell?)"
                )
            rec = {
                name: cell.replace("\r\n", "\n").replace("\r", "\n")
                for name, cell in zip(header, row)
                if name
            }
            doc_id = rec.get(self.fields.id_field, "").strip()
            if not doc_id:
                raise DataError(
                    f"{path}:{start}: empty id (column {self.fields.id_field!r}, id_field)"
                )
            yield start, self.fields.document(doc_id, rec, source)

    def _header(self, row: list[str], path: Path, line: int) -> list[str]:
        names = [cell.strip() for cell in row]
        seen: set[str] = set()
        for name in names:
            if name and name in seen:
                raise DataError(f"{path}:{line}: column {name!r} appears twice in the header")
            seen.add(name)
        self.fields.require_columns([n for n in names if n], f"{path}:{line}")
        return names
