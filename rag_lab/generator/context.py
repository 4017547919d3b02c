"""Structured context for generators: numbered blocks with source tags, under a token budget.

A block reads (English labels; Chinese ones for ``language="zh"``)::

    [1] doc: manual_hx200 | section: Faults > E102 | source: hx200.pdf, p. 12 | version: 2.1
        | valid: 2023-01-01 to 2024-12-31
    <chunk text>

(one header line, wrapped here).

Notes (``notes=[...]``: e.g. "sources disagree on ...", from a conflict check) come first, one line
each (``Note: ...`` / ``注意：...``), before the numbered blocks, and count against the budget.

Tags come from the chunk (``doc_id``, ``section``) and its metadata (``source``, ``page``,
``version``, ``valid_from``, ``valid_to``, and ``stale_age_days``, the freshness warning of
``context=[age]``: "warning: published 412 days ago"); absent ones are left out. Tokens are
pre-tokens (``rag_lab.text.TOKEN``: CJK characters, words, punctuation marks), the unit of the
token chunker, so a ``chunker.unit=tokens`` chunk of size n costs n plus its header.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.text.patterns import TOKEN
from rag_lab.types import Chunk

_LABELS: dict[str, dict[str, str]] = {
    "en": {
        "doc": "doc",
        "section": "section",
        "source": "source",
        "page": "p. {}",
        "version": "version",
        "valid": "valid",
        "from": "from {}",
        "to": "until {}",
        "range": "{} to {}",
        "note": "Note: {}",
        "stale": "warning: published {} days ago",
    },
    "zh": {
        "doc": "文档",
        "section": "章节",
        "source": "来源",
        "page": "第{}页",
        "version": "版本",
        "valid": "有效期",
        "from": "{}起",
        "to": "至{}",
        "range": "{}至{}",
        "note": "注意：{}",
        "stale": "警告：发布于{}天前",
    },
}


def count_tokens(text: str) -> int:
    return sum(1 for _ in TOKEN.finditer(text))


def source_tags(chunk: Chunk, language: str) -> list[str]:
    """``label: value`` tags of a chunk, in a fixed order."""
    lab = _LABELS[language]
    meta: Mapping[str, Any] = chunk.metadata
    tags = [f"{lab['doc']}: {chunk.doc_id}"]
    if chunk.section:
        tags.append(f"{lab['section']}: {chunk.section}")
    src = ", ".join(
        s for s in (_text(meta.get("source")), _fmt(lab["page"], meta.get("page"))) if s
    )
    if src:
        tags.append(f"{lab['source']}: {src}")
    if _text(meta.get("version")):
        tags.append(f"{lab['version']}: {_text(meta['version'])}")
    lo, hi = _text(meta.get("valid_from")), _text(meta.get("valid_to"))
    if lo or hi:
        if lo and hi:
            span = lab["range"].format(lo, hi)
        else:
            span = _fmt(lab["from"] if lo else lab["to"], lo or hi)
        tags.append(f"{lab['valid']}: {span}")
    if meta.get("stale_age_days") is not None:  # a freshness warning (context=[age])
        tags.append(lab["stale"].format(meta["stale_age_days"]))
    return tags


def block_tokens(chunks: Sequence[Chunk], language: str) -> int:
    """Pre-tokens of ``chunks`` rendered as numbered blocks (headers included), without a budget:
    what ``build_context`` charges for them."""
    return sum(
        count_tokens(_header(i, c, language)) + count_tokens(c.text) for i, c in enumerate(chunks)
    )


def _header(index: int, chunk: Chunk, language: str) -> str:
    return f"[{index + 1}] " + " | ".join(source_tags(chunk, language))


def build_context(
    chunks: Sequence[Chunk],
    max_tokens: int,
    language: str,
    notes: Sequence[str] = (),
) -> tuple[str, list[Chunk]]:
    """Render ``chunks`` (best first) as numbered blocks until ``max_tokens`` pre-tokens.

    ``notes`` (blank ones skipped) are rendered first, one line each, and their tokens are taken
    from the budget before any block; a budget they exhaust leaves no block.

    Returns ``(context, used)``: ``used[i]`` is block ``[i+1]``. Chunks are taken in order and the
    first one that does not fit ends the context (later, smaller chunks are not squeezed in: the
    order is the retriever's ranking). Exception: when even the first block does not fit, its text
    is cut at a pre-token boundary so that a non-empty input never yields an empty context; the
    returned chunk then carries the cut text. Raises ``ValueError`` for ``max_tokens < 1`` or an
    unknown ``language`` (``"zh"`` | ``"en"``).
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    if language not in _LABELS:
        raise ValueError(f"language must be one of {sorted(_LABELS)}, got {language!r}")
    lines = [_LABELS[language]["note"].format(n.strip()) for n in notes if n.strip()]
    blocks: list[str] = ["\n".join(lines)] if lines else []
    used: list[Chunk] = []
    left = max_tokens - sum(count_tokens(line) for line in lines)
    for chunk in chunks:
        header = _header(len(used), chunk, language)
        cost = count_tokens(header) + count_tokens(chunk.text)
        if cost > left:
            cut = _truncate(chunk, left - count_tokens(header)) if not used else None
            if cut is not None and lines and left <= count_tokens(header):
                cut = None  # notes left no room for even the header
            if cut is not None:
                blocks.append(f"{header}\n{cut.text}")
                used.append(cut)
            break
        blocks.append(f"{header}\n{chunk.text}")
        used.append(chunk)
        left -= cost
    return "\n\n".join(blocks), used


def _truncate(chunk: Chunk, n_tokens: int) -> Chunk | None:
    """The chunk cut to its first ``n_tokens`` pre-tokens; None when none fit."""
    # at least one token: a header longer than the budget once made this a negative slice
    spans = [m.end() for m in TOKEN.finditer(chunk.text)][: max(n_tokens, 1)]
    if not spans:
        return None
    text = chunk.text[: spans[-1]]
    return dataclasses.replace(chunk, text=text, end=chunk.start + len(text))


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _fmt(template: str, value: Any) -> str:
    return template.format(_text(value)) if _text(value) else ""
