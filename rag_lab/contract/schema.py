"""A metadata contract written as a YAML schema (``conf/contract/schema.yaml``): the fields every
chunk carries, the ones each source type requires, the heading → ``section_type`` mapping and the
entity patterns that fill ``entity_tags``."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rag_lab.access import readers_of
from rag_lab.contract.base import MODES, Checked, Problem
from rag_lab.errors import ConfigError, DataError
from rag_lab.types import Chunk, Document, Section
from rag_lab.validate import OptionError, choice

_MISSING: tuple[Any, ...] = (None, "", [])


def _compile(pattern: str, key: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise ConfigError(
            f"contract.{key}: invalid regular expression {pattern!r} ({exc})"
        ) from None


def parse_date(value: Any) -> dt.date | None:
    """An ISO date (``2024-07-01``, or a datetime ``2024-07-01T08:00:00``), else ``None``."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    text = str(value).strip()
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        pass
    try:
        return dt.datetime.fromisoformat(text).date()
    except ValueError:
        return None


class SchemaContract:
    """Args:
    mode: ``strict`` (the first problem stops the run: file, document, field) or ``warn``
        (problems recorded in the ingest report and counted as ``n_contract_problems``).
    fields: the contract's field set; every document gets each one (``None`` when unknown), so
        every chunk carries all of them (a filter never meets a missing key).
    source_type_keys: metadata keys read, in order, for the source type (``doc_type`` is the
        sample dataset's older name for it); the value is stored as ``source_type``.
    default_source_type: the type of a document that names none.
    source_types: type → ``{required: [field, ...]}``; a type not listed is a problem.
    dates: fields that must be ISO dates when present; ``valid_from`` after ``valid_to`` is a
        problem.
    identity: fields that identify a release of a document: two documents with equal values
        (the same manual twice under two file names) are a problem. (Two files with one document
        id are refused before the contract runs, in either mode: their chunk ids would collide.)
    section_types: type → regular expressions matched (case-insensitively, ``re.search``)
        against a section's headings, innermost first; the first type that matches is the
        section's ``section_type``.
    entity_patterns: tag kind → regular expression; every match in a section's text and
        headings joins its ``entity_tags`` (the document's are the union, plus any ``entities``
        the source already lists). After chunking, a chunk's ``entity_tags`` are its section's
        plus every match in its own section path and text (``tag_chunks``).
    readers_field: the field naming who may read a document (``rag_lab.access``): a list of
        names, stored in canonical form; anything else is a problem (and reads as unknown).
        ``None``: not checked.
    """

    def __init__(
        self,
        mode: str = "warn",
        fields: Sequence[str] = (),
        source_type_keys: Sequence[str] = ("source_type", "doc_type"),
        default_source_type: str = "wiki",
        source_types: Mapping[str, Mapping[str, Any]] | None = None,
        dates: Sequence[str] = ("valid_from", "valid_to"),
        identity: Sequence[str] = ("title", "version"),
        section_types: Mapping[str, Sequence[str]] | None = None,
        entity_patterns: Mapping[str, str] | None = None,
        readers_field: str | None = "readers",
    ) -> None:
        try:
            self.mode = choice(mode, "mode", MODES)
        except OptionError as exc:
            raise exc.at("contract") from None
        self.fields = tuple(fields)
        self.source_type_keys = tuple(source_type_keys)
        self.default_source_type = default_source_type
        self.required = {
            str(t): tuple((spec or {}).get("required", ()))
            for t, spec in (source_types or {}).items()
        }
        self.dates = tuple(dates)
        self.identity = tuple(identity)
        self.section_types = [
            (str(t), [_compile(p, f"section_types.{t}") for p in pats])
            for t, pats in (section_types or {}).items()
        ]
        self.readers_field = readers_field
        self.entity_patterns = [
            _compile(p, f"entity_patterns.{k}") for k, p in (entity_patterns or {}).items()
        ]

    # -- derived fields ---------------------------------------------------------------------------
    def section_type(self, path: Sequence[str]) -> str | None:
        for heading in reversed(path):
            for name, patterns in self.section_types:
                if any(p.search(heading) for p in patterns):
                    return name
        return None

    def entities(self, text: str) -> list[str]:
        found = {m.group(0) for p in self.entity_patterns for m in p.finditer(text)}
        return sorted(found)

    def tag_chunks(self, chunks: Sequence[Chunk]) -> list[Chunk]:
        """The chunks with ``entity_tags`` = what they carry (the section's, or the document's
        for a document without sections) plus the matches in their own section path and text:
        a chunk that starts in a heading-only section but holds a whole fault table is tagged
        with its codes, not only the model its heading names."""
        out = []
        for c in chunks:
            have = c.metadata.get("entity_tags")
            tags = {str(t) for t in have} if isinstance(have, (list, tuple)) else set()
            found = tags | set(self.entities(c.section + "\n" + c.text))
            if found == tags and have is not None:
                out.append(c)
                continue
            out.append(replace(c, metadata={**c.metadata, "entity_tags": sorted(found)}))
        return out

    def _sections(self, doc: Document) -> tuple[Section, ...]:
        out = []
        for sec in doc.sections:
            meta = dict(sec.metadata)
            meta.setdefault("section_type", self.section_type(sec.path))
            tags = self.entities(" ".join(sec.path) + "\n" + doc.text[sec.start : sec.end])
            meta["entity_tags"] = tags
            out.append(replace(sec, metadata=meta))
        return tuple(out)

    # -- checks ---------------------------------------------------------------------------------
    def _value(self, doc: Document, meta: Mapping[str, Any], name: str) -> Any:
        if name == "doc_id":
            return doc.doc_id
        if name == "title":
            return doc.title or None
        return meta.get(name)

    def _complete(self, doc: Document, where: str, problems: list[Problem]) -> Document:
        meta = dict(doc.metadata)

        def problem(name: str, message: str) -> None:
            problems.append(Problem(doc.doc_id, where, name, message))

        kind = next(
            (meta[k] for k in self.source_type_keys if meta.get(k) not in _MISSING),
            self.default_source_type,
        )
        kind = str(kind)
        if self.required and kind not in self.required:
            problem("source_type", f"unknown type {kind!r} (known: {', '.join(self.required)})")
        meta["source_type"] = kind
        for name in self.required.get(kind, ()):
            if self._value(doc, meta, name) in _MISSING:
                problem(name, f"missing (required for source_type {kind})")
        parsed: dict[str, dt.date] = {}
        for name in self.dates:
            value = meta.get(name)
            if value in _MISSING:
                continue
            day = parse_date(value)
            if day is None:
                problem(name, f"{value!r} is not an ISO date (YYYY-MM-DD)")
            else:
                parsed[name] = day
                meta[name] = day.isoformat()
        start, end = parsed.get("valid_from"), parsed.get("valid_to")
        if start and end and start > end:
            problem("valid_from", f"{start} is after valid_to {end}")
        if self.readers_field and meta.get(self.readers_field) is not None:
            readers = readers_of({"readers": meta[self.readers_field]})
            if readers is None:
                problem(self.readers_field, f"{meta[self.readers_field]!r} is not a list of names")
            else:
                meta[self.readers_field] = sorted(readers)
        sections = self._sections(doc)
        tags = {t for sec in sections for t in sec.metadata.get("entity_tags", ())}
        listed = meta.get("entities") or []
        tags.update(str(e) for e in ([listed] if isinstance(listed, str) else listed))
        tags.update(self.entities(doc.title + "\n" + doc.text) if not sections else ())
        meta["entity_tags"] = sorted(tags)
        meta["doc_id"] = doc.doc_id
        if "confidence" not in meta:  # OCR'd sections carry their own; text layers are exact
            meta["confidence"] = doc.stats.get("ocr_confidence", 1.0)
        for name in self.fields:
            meta.setdefault(name, None)
        return replace(doc, metadata=meta, sections=sections)

    def standalone(self, doc: Document) -> bool:
        """``finish`` compares a completed document with others only by its identity, and only
        when every identity field has a value (``rag_lab.contract.base.Separable``)."""
        return not self.identity or any(
            self._value(doc, doc.metadata, f) in _MISSING for f in self.identity
        )

    def complete(self, doc: Document, where: str) -> tuple[Document, list[Problem]]:
        problems: list[Problem] = []
        return self._complete(doc, where, problems), problems

    def finish(
        self, done: Sequence[tuple[Document, Sequence[Problem]]], where: Mapping[str, str]
    ) -> Checked:
        problems: list[Problem] = []
        out: list[Document] = []
        seen: dict[tuple[Any, ...], str] = {}
        for doc, own in done:
            src = where.get(doc.doc_id, doc.doc_id)
            n = len(problems)
            problems.extend(own)
            if self.identity:
                ident = tuple(self._value(doc, doc.metadata, f) for f in self.identity)
                if all(v not in _MISSING for v in ident):
                    if ident in seen:
                        fields = ", ".join(f"{f}={v!r}" for f, v in zip(self.identity, ident))
                        problems.append(
                            Problem(
                                doc.doc_id,
                                src,
                                self.identity[0],
                                f"{fields} also declared by document {seen[ident]!r}",
                            )
                        )
                    else:
                        seen[ident] = doc.doc_id
            if self.mode == "strict" and len(problems) > n:
                raise DataError(f"{problems[n]} (contract.mode=warn records problems instead)")
            out.append(doc)
        return Checked(tuple(out), tuple(problems))

    def check(self, documents: Sequence[Document], where: Mapping[str, str]) -> Checked:
        return self.finish(
            [self.complete(doc, where.get(doc.doc_id, doc.doc_id)) for doc in documents], where
        )
