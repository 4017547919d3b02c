"""Markdown with optional YAML front matter; headings become sections with their heading path.

Front matter keys ``doc_id`` and ``title`` set the id and title; every other key becomes metadata
(dates are normalised to ISO strings). The body text is kept verbatim (headings included), so
chunk offsets index into it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path

import yaml

from rag_lab.errors import DataError
from rag_lab.io.files import read_text
from rag_lab.parser.base import relative_id
from rag_lab.types import Document, Section

_FRONT = re.compile(r"\A---[ \t]*\n(.*?\n)---[ \t]*(?:\n|\Z)", re.S)
# CommonMark ATX heading: a closing run of "#" must follow a space ("## Using C#" keeps its "#")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.M)
_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)


def _iso(value):
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_iso(v) for v in value]
    if isinstance(value, dict):
        return {k: _iso(v) for k, v in value.items()}
    return value


def _one_line(problem: object) -> str:
    return " ".join(str(problem).split())


def split_front_matter(text: str, path: Path) -> tuple[dict, str]:
    """``(metadata, body)``. Malformed front matter (YAML errors, impossible dates such as
    ``2024-13-45``, nesting too deep, an alias that contains itself) is a ``DataError``."""
    m = _FRONT.match(text)
    if not m:
        return {}, text
    try:
        meta = yaml.safe_load(m.group(1)) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 2}" if mark is not None else ""
        problem = _one_line(getattr(exc, "problem", None) or exc)  # ReaderError has 2 lines
        raise DataError(f"{path}{line}: malformed YAML front matter ({problem})") from None
    except (ValueError, TypeError, OverflowError) as exc:  # yaml's date constructor: 2024-13-45
        raise DataError(f"{path}: malformed YAML front matter ({_one_line(exc)})") from None
    except RecursionError:
        raise DataError(f"{path}: malformed YAML front matter (nested too deeply)") from None
    if not isinstance(meta, dict):
        raise DataError(f"{path}: front matter must be a mapping")
    try:
        out = {str(k): _iso(v) for k, v in meta.items()}
        json.dumps(out, default=str)  # metadata is stored as JSON (stage cache, exports)
    except (RecursionError, ValueError):
        raise DataError(
            f"{path}: front matter refers to itself (a YAML alias inside its own anchor)"
        ) from None
    return out, text[m.end() :]


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
