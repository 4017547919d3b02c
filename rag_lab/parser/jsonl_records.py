"""JSONL records (tickets, DB rows exported as JSON): one document per line, fields configurable."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rag_lab.errors import DataError
from rag_lab.io.files import jsonl_record, read_jsonl, require_key
from rag_lab.parser._records import FieldMap, source_of
from rag_lab.types import Document


class JsonlRecordsParser:
    """Args:
    id_field: record key holding the document id.
    text_fields: keys joined (blank line between) into the document text; missing keys skipped,
        but a record with none of them is an error.
    title_field: key holding the title (optional).
    metadata_field: key holding a metadata object that is merged in (optional).
    extra_fields_as_metadata: other top-level keys become metadata too (DB rows, tickets).
    """

    suffixes = (".jsonl",)
    plain = True  # parsed each time, not cached per file (rag_lab.parser.base.Plain)

    def __init__(
        self,
        id_field: str = "_id",
        text_fields: Sequence[str] = ("text",),
        title_field: str | None = "title",
        metadata_field: str | None = "metadata",
        extra_fields_as_metadata: bool = True,
    ) -> None:
        self.id_field = id_field
        self.text_fields = tuple(text_fields)
        self.title_field = title_field
        self.metadata_field = metadata_field
        self.extra_fields_as_metadata = extra_fields_as_metadata

    def parse(self, path: Path, root: Path) -> Iterator[Document]:
        for _, doc in self.parse_lines(path, root):
            yield doc

    def parse_lines(self, path: Path, root: Path) -> Iterator[tuple[int | None, Document]]:
        """``(line, document)`` per record (``rag_lab.parser.base.LineLocated``).

        A record that has none of the text fields is an error (wrong ``text_fields``); one whose
        text fields are present but empty or null gives a document with empty text, which
        the corpus read (``rag_lab.pipeline.corpus``) skips or refuses (``dataset.on_empty``)."""
        fields = self._fields()
        source = source_of(path, root)
        for lineno, rec in read_jsonl(path):
            yield lineno, self._document(fields, rec, source, path, lineno)

    def parse_record(self, path: Path, root: Path, lineno: int, line: str) -> Document | None:
        """Line ``lineno`` (``line``, its text) of the file alone, as ``parse_lines`` reads it:
        its document, ``None`` for a blank line (``rag_lab.parser.base.RecordLines``)."""
        rec = jsonl_record(path, lineno, line)
        if rec is None:
            return None
        return self._document(self._fields(), rec, source_of(path, root), path, lineno)

    def _fields(self) -> FieldMap:
        return FieldMap(
            self.id_field,
            self.text_fields,
            self.title_field,
            metadata_fields=None if self.extra_fields_as_metadata else (),
            reserved=(self.metadata_field,) if self.metadata_field else (),
            keep_empty=True,  # a JSON null or "" is a value the record chose to carry
        )

    def _document(
        self, fields: FieldMap, rec: dict[str, Any], source: str, path: Path, lineno: int
    ) -> Document:
        doc_id = str(require_key(rec, self.id_field, path, lineno))
        if not any(f in rec for f in self.text_fields):
            raise DataError(
                f"{path}:{lineno}: record {doc_id!r} has none of the text fields "
                f"{list(self.text_fields)}"
            )
        extra = rec.get(self.metadata_field) if self.metadata_field else None
        if extra is not None and not isinstance(extra, dict):
            raise DataError(f"{path}:{lineno}: {self.metadata_field!r} must be an object")
        return fields.document(doc_id, rec, source, extra)
