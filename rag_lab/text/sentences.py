"""Sentences of a text: lines, then ``SENTENCE_BOUNDARY`` (the recursive chunker's sentence rule),
so a "sentence" means the same thing when chunking, generating and judging."""

from __future__ import annotations

from rag_lab.text.patterns import SENTENCE_BOUNDARY


def split_sentences(text: str) -> list[str]:
    """Non-empty, stripped sentences in order; line breaks always end a sentence."""
    out: list[str] = []
    for line in text.splitlines():
        out.extend(s.strip() for s in SENTENCE_BOUNDARY.split(line) if s.strip())
    return out
