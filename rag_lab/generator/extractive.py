"""Extractive baseline generator: no model, deterministic, answers by quoting context sentences.

It is the floor an LLM generator has to beat and a faithful-by-construction reference for the
judges: every sentence it returns is copied from a retrieved chunk.
"""

from __future__ import annotations

from collections.abc import Sequence

from rag_lab.generator.context import build_context
from rag_lab.text import ContentTerms, normalise_text, split_sentences
from rag_lab.text.language import detect_language
from rag_lab.text.refusals import REFUSALS
from rag_lab.tokenizer.base import Tokenizer
from rag_lab.types import Chunk

_CJK_END = tuple("。！？；")


def _join(sentences: list[str]) -> str:
    """Concatenate; a space only after a sentence that does not end with CJK punctuation."""
    out = sentences[0]
    for sent in sentences[1:]:
        out += sent if out.endswith(_CJK_END) else " " + sent
    return out


class ExtractiveGenerator:
    """Args:
        max_sentences: at most this many sentences in an answer.
        min_overlap: a sentence qualifies when it contains at least this share of the query's
            content terms; no qualifying sentence → the refusal string of the query's language.
        tokenizer: term analysis (default: jieba exact mode, which handles Chinese and English);
            stopwords are dropped and English words stemmed either way (``ContentTerms``).
        max_context_tokens: read only the chunks ``build_context`` would give an LLM under this
            budget (None: all chunks), so the baseline sees what a model would see.

    The answer is the qualifying sentences with the highest overlap (ties: earlier chunk, then
    earlier sentence), deduplicated, and put back in reading order (chunk rank, position).
    """

    def __init__(
        self,
        max_sentences: int = 2,
        min_overlap: float = 0.2,
        tokenizer: Tokenizer | None = None,
        max_context_tokens: int | None = None,
    ) -> None:
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
        if not 0.0 < min_overlap <= 1.0:
            raise ValueError(f"min_overlap must be in (0, 1], got {min_overlap}")
        self.max_sentences, self.min_overlap = max_sentences, min_overlap
        self.max_context_tokens = max_context_tokens
        self.terms = ContentTerms(tokenizer)

    def generate(self, query: str, chunks: Sequence[Chunk], notes: Sequence[str] = ()) -> str:
        """``notes`` are ignored: the baseline only quotes chunk sentences."""
        language = detect_language(query)
        if self.max_context_tokens is not None:
            chunks = build_context(chunks, self.max_context_tokens, language)[1]
        query_terms = set(self.terms(query))
        candidates = self._candidates(chunks)
        if not query_terms or not candidates:
            return REFUSALS[language]
        sentence_terms = self.terms.many([s for _, s in candidates])
        scored = [
            (len(query_terms.intersection(t)) / len(query_terms), pos)
            for pos, t in enumerate(sentence_terms)
        ]
        best = sorted((s for s in scored if s[0] >= self.min_overlap), key=lambda s: (-s[0], s[1]))
        if not best:
            return REFUSALS[language]
        picked = sorted(pos for _, pos in best[: self.max_sentences])
        return _join([candidates[pos][1] for pos in picked])

    @staticmethod
    def _candidates(chunks: Sequence[Chunk]) -> list[tuple[int, str]]:
        """``(chunk rank, sentence)`` in reading order; repeats (overlapping chunks) dropped."""
        seen: set[str] = set()
        out = []
        for rank, chunk in enumerate(chunks):
            for sent in split_sentences(chunk.text):
                key = normalise_text(sent)
                if key not in seen:
                    seen.add(key)
                    out.append((rank, sent))
        return out
