"""The script of a corpus: the share of CJK (Han) characters among the letters of a sample.

One number decides ``tokenizer=auto`` (jieba for a Chinese corpus) and the warning given when a
Chinese corpus meets an analyser that does not segment Chinese (``rag_lab.pipeline.build``). A
tokenizer class that segments Chinese says so with ``segments_chinese = True``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

# a corpus whose sample has at least this share of Han characters among its letters is Chinese
# (a bilingual corpus too: jieba keeps Latin runs whole, the English analyser drops Chinese)
CJK_CORPUS_SHARE = 0.2
SAMPLE_CHARS = 200_000
# suffixes read as raw text for the sample; JSONL records contribute their string values (a file
# written with ensure_ascii holds \\u escapes, not characters); other formats (PDF, DOCX) are
# left out of the sample
_TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".html", ".htm", ".csv", ".tsv", ".xml"}


_CJK = re.compile("[\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff]")  # the ranges of _is_cjk


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF


def cjk_share(texts: Iterable[str], max_chars: int = SAMPLE_CHARS) -> float | None:
    """Han characters / letters over the first ``max_chars`` characters of ``texts``; ``None``
    when the sample has no letter."""
    han = letters = seen = 0
    for text in texts:
        part = text[: max(0, max_chars - seen)]
        letters += sum(map(str.isalpha, part))  # what _is_cjk says, counted in C
        han += sum(map(str.isalpha, _CJK.findall(part)))
        seen += len(text)
        if seen >= max_chars:
            break
    return han / letters if letters else None


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def corpus_sample(sources: Sequence[Path], max_chars: int = SAMPLE_CHARS) -> list[str]:
    """Text from the corpus files, about ``max_chars`` in all, spread over the files (each gets an
    equal budget, so one large file does not hide the others)."""
    readable = [p for p in sources if p.suffix.lower() in _TEXT_SUFFIXES | {".jsonl"}]
    if not readable:
        return []
    budget = max(2_000, max_chars // len(readable))
    out: list[str] = []
    for path in readable:
        got = 0
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                if path.suffix.lower() != ".jsonl":
                    out.append(fh.read(budget))
                    continue
                for line in fh:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    for s in _strings({k: v for k, v in rec.items() if k != "_id"}):
                        out.append(s)
                        got += len(s)
                    if got >= budget:
                        break
        except OSError:
            continue
    return out


def segments_chinese(cls: type) -> bool:
    """Whether a tokenizer class declares that it segments Chinese (``segments_chinese = True``)."""
    return any(vars(base).get("segments_chinese") is True for base in cls.__mro__)
