"""The refusal strings every generator replies with when the context lacks the answer, and how a
response is recognised as one (generators, judges and answer metrics share them)."""

from __future__ import annotations

import re

from rag_lab.text.normalise import normalise_text
from rag_lab.text.sentences import split_sentences

REFUSALS: dict[str, str] = {
    "en": "I cannot tell from the provided context.",
    "zh": "根据所给资料无法回答。",
}

_PUNCT = re.compile(r"[^\w\s]|_")
_REFUSAL_KEYS = tuple(_PUNCT.sub("", normalise_text(r)).strip() for r in REFUSALS.values())


def is_refusal_sentence(sentence: str) -> bool:
    """True when the sentence contains a refusal string (any language; case, punctuation and
    surrounding words ignored)."""
    key = _PUNCT.sub("", normalise_text(sentence)).strip()
    return bool(key) and any(r in key for r in _REFUSAL_KEYS)


def is_refusal(response: str) -> bool:
    """True when every sentence of the response is a refusal string (``REFUSALS``, any language,
    case / punctuation / surrounding words within the sentence ignored)."""
    sentences = split_sentences(response)
    return bool(sentences) and all(is_refusal_sentence(s) for s in sentences)
