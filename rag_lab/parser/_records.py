"""Shared by the record parsers (JSONL, CSV, SQL) and the metadata of HTML and Word files.

``FieldMap`` is the one place where a record (a JSON object, a CSV row, a query's row) becomes a
``Document``: which field holds the id, which are joined into the text, which is the title,
which become metadata, and ``metadata['source']``. ``json_value`` / ``iso_date`` /
``split_list`` normalise metadata values the same way in every parser.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from rag_lab.errors import DataError
from rag_lab.parser.base import relative_id
from rag_lab.types import Document
from rag_lab.validate import OptionError

# the metadata contract's dates: freshness filtering compares them as YYYY-MM-DD
CONTRACT_DATES = ("valid_from", "valid_to")
_LIST_SEP = re.compile(r"[,;，；]")


def is_empty(value: object) -> bool:
    """``None``, ``""`` and blank strings: values left out of metadata."""
    return value is None or (isinstance(value, str) and not value.strip())


def json_value(value: Any) -> Any:
    """A value fit for JSON metadata: dates and times as ISO strings, ``Decimal`` / UUID /
    non-finite floats and other non-JSON objects as ``str``, ``bytes`` decoded as UTF-8 (bad
    bytes replaced), lists and mappings converted item by item."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return str(value)


def iso_date(value: Any, where: str, key: str) -> str:
    """A contract date (``valid_from``, ``valid_to``) as an ISO string; a ``date``/``datetime``
    or a string starting with ``YYYY-MM-DD`` is accepted as is (a datetime keeps its time). Any
    other value is a ``DataError`` naming ``where`` and the key: a date the freshness filter
    could not read would otherwise only fail at query time."""
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    text = str(value).strip()
    try:
        dt.date.fromisoformat(text[:10])
    except ValueError:
        raise DataError(f"{where}: {key}={text!r} is not an ISO date (YYYY-MM-DD)") from None
    return text


def split_list(value: str) -> list[str]:
    """``"HX-200, E102; pump"`` → ``["HX-200", "E102", "pump"]`` (also full-width ``，；``)."""
    return [part.strip() for part in _LIST_SEP.split(value) if part.strip()]


@dataclass(frozen=True)
class FieldMap:
    """Record fields → document: ``id_field`` (the id, as ``str``), ``text_fields`` (joined with
    a blank line; missing, ``None`` and ``""`` values skipped), ``title_field`` (optional),
    ``metadata_fields`` (these fields, or ``None`` = every field not used otherwise and not in
    ``reserved``). ``keep_empty=False`` leaves empty values (``None``, blank strings) out of the
    metadata."""

    id_field: str
    text_fields: tuple[str, ...]
    title_field: str | None = None
    metadata_fields: tuple[str, ...] | None = None
    reserved: tuple[str, ...] = ()
    keep_empty: bool = False

    @classmethod
    def from_options(
        cls,
        id_field: object,
        text_fields: object,
        title_field: object,
        metadata_fields: object,
    ) -> FieldMap:
        """A parser's field options checked (``OptionError`` naming the option) and mapped."""
        if isinstance(text_fields, str) or not isinstance(text_fields, (list, tuple)):
            raise OptionError("text_fields", text_fields, "must be a list of column names")
        if not text_fields:
            raise OptionError("text_fields", list(text_fields), "must name at least one column")
        if metadata_fields is not None and (
            isinstance(metadata_fields, str) or not isinstance(metadata_fields, (list, tuple))
        ):
            raise OptionError("metadata_fields", metadata_fields, "must be a list or null")
        return cls(
            str(id_field),
            tuple(str(f) for f in text_fields),
            str(title_field) if title_field else None,
            None if metadata_fields is None else tuple(str(f) for f in metadata_fields),
        )

    @property
    def used(self) -> frozenset[str]:
        named = {self.id_field, *self.text_fields, *self.reserved}
        if self.title_field:
            named.add(self.title_field)
        return frozenset(named)

    def require_columns(self, columns: Sequence[str], where: str, what: str = "column") -> None:
        """``DataError`` unless every configured field is among ``columns`` (a CSV header, a
        query's result): names the field, the option it comes from and the columns there are."""
        have = set(columns)
        wanted: list[tuple[str, str]] = [("id_field", self.id_field)]
        wanted += [("text_fields", f) for f in self.text_fields]
        if self.title_field:
            wanted.append(("title_field", self.title_field))
        wanted += [("metadata_fields", f) for f in self.metadata_fields or ()]
        for option, name in wanted:
            if name not in have:
                listed = ", ".join(columns) if columns else "none"
                raise DataError(f"{where}: no {what} {name!r} ({option}; columns: {listed})")

    def text(self, rec: Mapping[str, Any]) -> str:
        parts = [str(rec[f]) for f in self.text_fields if rec.get(f) not in (None, "")]
        return "\n\n".join(parts)

    def title(self, rec: Mapping[str, Any]) -> str:
        return str(rec.get(self.title_field) or "") if self.title_field else ""

    def metadata(self, rec: Mapping[str, Any]) -> dict[str, Any]:
        if self.metadata_fields is None:
            used = self.used
            items = [(k, v) for k, v in rec.items() if k not in used]
        else:
            items = [(k, rec.get(k)) for k in self.metadata_fields]
        return {k: v for k, v in items if self.keep_empty or not is_empty(v)}

    def document(
        self,
        doc_id: str,
        rec: Mapping[str, Any],
        source: str,
        extra: Mapping[str, Any] | None = None,
    ) -> Document:
        """The document of ``rec``; ``extra`` (a JSONL record's metadata object) is merged over
        the field metadata, and ``source`` is set last."""
        meta = self.metadata(rec)
        if extra:
            meta.update(extra)
        meta["source"] = source
        return Document(doc_id, self.text(rec), self.title(rec), meta)


def source_of(path: Path, root: Path) -> str:
    """``metadata['source']``: the path relative to the corpus root, with its suffix."""
    return relative_id(path, root) + path.suffix
