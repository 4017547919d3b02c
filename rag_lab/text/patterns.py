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
# "U.S."), the last letter of a dotted one ("e.g.", "a.m.") and a title (Mr., Dr., St., vs.).
SENTENCE_BOUNDARY = re.compile(
    r"(?<=[.!?])(?<!\b[A-Z]\.)(?<!\.[a-z]\.)"
    r"(?<!\b(?:Mr|Ms|Dr|St|Mt|vs)\.)(?<!\b(?:Mrs|Drs)\.)(?<!\bProf\.)"
    r"\s+(?=\S)|(?<=[。！？；])"
)


def has_cjk(text: str) -> bool:
    return CJK_CHAR.search(text) is not None
