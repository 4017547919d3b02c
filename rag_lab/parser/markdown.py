"""Markdown with optional YAML front matter; headings become sections with their heading path.

Front matter keys ``doc_id`` and ``title`` set the id and title; every other key becomes metadata
(dates are normalised to ISO strings). The body text is kept verbatim (headings included), so
chunk offsets index into it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path

import yaml

from rag_lab.errors import DataError
from rag_lab.parser.base import relative_id
from rag_lab.parser.plain_text import read_text
from rag_lab.types import Document, Section

_FRONT = re.compile(r"\A---[ \t]*\n(.*?\n)---[ \t]*(?:\n|\Z)", re.S)
# CommonMark ATX heading: a closing run of "#" must follow a space ("## Using C#" keeps its "#")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.M)
_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)


def _iso(value):
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, list):
        return [_iso(v) for v in value]
    return value


def split_front_matter(text: str, path: Path) -> tuple[dict, str]:
    m = _FRONT.match(text)
    if not m:
        return {}, text
    try:
        meta = yaml.safe_load(m.group(1)) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", exc)
        raise DataError(f"{path}{line}: malformed YAML front matter ({problem})") from None
    if not isinstance(meta, dict):
        raise DataError(f"{path}: front matter must be a mapping")
    return {str(k): _iso(v) for k, v in meta.items()}, text[m.end() :]


def heading_sections(body: str) -> tuple[Section, ...]:
    """Sections from ATX headings (ignoring ``#`` lines inside code fences). A section runs from its
    heading to the next heading; text before the first heading is a section with an empty path."""
    fenced = [(m.start(), m.end()) for m in _FENCE.finditer(body)]
    heads = [m for m in _HEADING.finditer(body) if not any(a <= m.start() < b for a, b in fenced)]
    sections: list[Section] = []
    if heads and heads[0].start() > 0 and body[: heads[0].start()].strip():
        sections.append(Section(0, heads[0].start(), ()))
    stack: list[tuple[int, str]] = []
    for i, m in enumerate(heads):
        level, title = len(m.group(1)), m.group(2).strip()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        end = heads[i + 1].start() if i + 1 < len(heads) else len(body)
        sections.append(Section(m.start(), end, tuple(t for _, t in stack)))
    return tuple(sections)


class MarkdownParser:
    suffixes = (".md", ".markdown")

    def parse(self, path: Path, root: Path) -> Iterator[Document]:
        meta, body = split_front_matter(read_text(path).replace("\r\n", "\n"), path)
        doc_id = str(meta.pop("doc_id", None) or relative_id(path, root))
        sections = heading_sections(body)
        title = meta.pop("title", None)
        if not title:
            h1 = next((s.path[0] for s in sections if s.path), "")
            title = h1 or path.stem
        meta["source"] = relative_id(path, root) + path.suffix
        yield Document(doc_id, body, str(title), meta, sections)
