"""Extractive distillation: of each chunk keep only the sentences that carry the query's content
terms (fault codes, model numbers and values are terms too), so the generator reads a few facts
instead of whole chunks.

Each kept sentence is a line of its own (``split_sentences`` splits there, so a generator
reading the chunk sees the same sentences) under its source chunk's header, so block ``[n]`` of
the context cites it (the answer prompt asks for ``[n]`` citations). A chunk without such a
sentence is dropped; when no chunk has one, the chunks are returned unchanged (counted as
``kept_all``): a distiller should not by itself turn a query into a refusal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from rag_lab.text import ContentTerms, normalise_text, split_sentences
from rag_lab.tokenizer.base import Tokenizer
from rag_lab.types import Chunk
from rag_lab.validate import integer, number


class ExtractiveDistiller:
    """Args:
    min_overlap: a sentence is kept when it holds at least this share of the query's content
        terms (default 0.2, the extractive generator's own threshold).
    max_sentences: at most this many sentences per chunk (the best by overlap, kept in
        reading order).
    tokenizer: term analysis (default jieba exact mode; ``ContentTerms``).
    """

    def __init__(
        self, min_overlap: float = 0.2, max_sentences: int = 3, tokenizer: Tokenizer | None = None
    ) -> None:
        self.min_overlap = number(min_overlap, "min_overlap", gt=0, le=1)
        self.max_sentences = integer(max_sentences, "max_sentences", ge=1)
        self.terms = ContentTerms(tokenizer)
        self.stats: dict[str, float] = {"kept_all": 0.0, "sentences_kept": 0.0}

    def apply(self, query: str, chunks: Sequence[Chunk]) -> list[Chunk]:
        wanted = set(self.terms(query))
        if not wanted:
            self.stats["kept_all"] += 1
            return list(chunks)
        out: list[Chunk] = []
        seen: set[str] = set()  # a sentence repeated by overlapping chunks is kept once
        for chunk in chunks:
            sentences = split_sentences(chunk.text)
            shares = [len(wanted.intersection(t)) / len(wanted) for t in self.terms.many(sentences)]
            best = sorted(
                (i for i, s in enumerate(shares) if s >= self.min_overlap),
                key=lambda i: (-shares[i], i),
            )[: self.max_sentences]
            picked = []
            for i in sorted(best):
                key = normalise_text(sentences[i])
                if key not in seen:
                    seen.add(key)
                    picked.append(sentences[i])
            if picked:
                out.append(dataclasses.replace(chunk, text="\n".join(picked)))
        if not out:
            self.stats["kept_all"] += 1
            return list(chunks)
        self.stats["sentences_kept"] += sum(len(split_sentences(c.text)) for c in out)
        return out
