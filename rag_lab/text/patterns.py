"""Character classes and token / sentence patterns, shared by chunkers, generators, judges and
answer metrics, so a "token" and a "sentence" mean the same thing in every stage."""

from __future__ import annotations

import re

# CJK ideographs (with extensions and compatibility forms), kana and hangul: scripts written
# without spaces between words
CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
CJK_CHAR = re.compile(f"[{CJK}]")

# Pre-tokens: one CJK character, a run of other word characters, or one punctuation mark. This is
# how BERT-style tokenizers pre-split text, so a token window approximates a model-token window.
TOKEN = re.compile(rf"[{CJK}]|[^\W{CJK}]+|[^\w\s]")

# Where a new sentence starts: after ``. ! ?`` and the whitespace that follows them, or right after
# Chinese ``。！？；``. The recursive chunker splits on it and ``split_sentences`` uses it. A full
# stop after an abbreviation ends no sentence: a capital letter ("the T. rex", "J. K. Rowling",
# "U.S."), the last letter of a dotted one ("e.g.", "a.m.") and a title (Mr., Dr., St., vs.); a
# degree sign makes the capital a unit ("200 °C. Open the cover" is two sentences).
SENTENCE_BOUNDARY = re.compile(
    r"(?<=[.!?])(?<!(?<!°)\b[A-Z]\.)(?<!\.[a-z]\.)"
    r"(?<!\b(?:Mr|Ms|Dr|St|Mt|vs)\.)(?<!\b(?:Mrs|Drs)\.)(?<!\bProf\.)"
    r"\s+(?=\S)|(?<=[。！？；])"
)


def has_cjk(text: str) -> bool:
    return CJK_CHAR.search(text) is not None


_ALNUM = re.compile(r"[A-Za-z0-9]")


def term_pattern(term: str) -> re.Pattern[str]:
    """The regular expression a dictionary ``term`` matches with (query expansion, entities): a
    term with Latin letters or digits at an edge matches only where no other letter or digit is
    next to that edge (``PLC`` in ``PLC-IO``, not in ``PLCX``); words match in any case, an
    acronym (capitals only) only in capitals (``DB`` is not the ``dB`` of ``dB(A)``); a Chinese
    term matches as a substring."""
    head = r"(?<![A-Za-z0-9])" if _ALNUM.match(term[0]) else ""
    tail = r"(?![A-Za-z0-9])" if _ALNUM.match(term[-1]) else ""
    body = r"\s+".join(re.escape(w) for w in term.split())
    return re.compile(head + body + tail, 0 if _is_acronym(term) else re.IGNORECASE)


def _is_acronym(term: str) -> bool:
    """Capitals only (``PLC``, ``I/O``): matched with their case, so ``dB`` is not ``DB``."""
    return sum(c.isupper() for c in term) >= 2 and not any(c.islower() for c in term)
