"""Text utilities every stage may import (a leaf: it imports no stage package at import time).

- ``patterns``: ``CJK`` ranges, ``CJK_CHAR``, ``TOKEN`` (pre-tokens: one CJK character, a word, or
  a punctuation mark; the token chunker's and the context budget's unit), ``SENTENCE_BOUNDARY``
  (the sentence rule of the recursive chunker and of ``split_sentences``), ``has_cjk``.
- ``normalise``: ``normalise_text`` (NFKC, case folding, whitespace collapsed), the form strings
  are compared in by evidence labels, answer metrics, facts and judges.
- ``sentences``: ``split_sentences``.
- ``terms``: ``ContentTerms`` and ``TermSupport`` (content terms and their support in a context).
"""

from rag_lab.text.normalise import normalise_text
from rag_lab.text.patterns import CJK, CJK_CHAR, SENTENCE_BOUNDARY, TOKEN, has_cjk
from rag_lab.text.sentences import split_sentences
from rag_lab.text.terms import STOPWORDS, ContentTerms, TermSupport

__all__ = [
    "CJK",
    "CJK_CHAR",
    "SENTENCE_BOUNDARY",
    "STOPWORDS",
    "TOKEN",
    "ContentTerms",
    "TermSupport",
    "has_cjk",
    "normalise_text",
    "split_sentences",
]
