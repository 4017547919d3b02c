"""Chinese (and mixed Chinese/English) analysis with jieba's search-engine segmentation.

``jieba.lcut_for_search`` emits both a word and its sub-words (``中华人民共和国`` → ``中华``,
``华人``, ``人民``, ``共和``, ``共和国``, ...), which raises recall for BM25. Latin-script runs
(fault codes, model numbers, English words) are kept whole and lower-cased, so ``E102`` and
``HX-200`` stay exact terms; punctuation and whitespace are dropped.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Sequence

from rag_lab.validate import boolean, choice

_KEEP = re.compile(r"\w", re.UNICODE)
_SHORT = 256  # a query, not a document: its segmentation is remembered for the next stage


@functools.lru_cache(maxsize=8)
def _segment_short(cut: Callable[[str], list[str]], text: str) -> tuple[str, ...]:
    """A query's segmentation, kept for the few calls that follow: BM25 and a dense or hashing
    embedder segment the same query one after the other (jieba was a quarter of a served query's
    time, half of it the second segmentation). A handful of entries: repeats across queries are
    not what this is for. Its blocks come from the blocks' cache (``_segment``)."""
    return tuple(_segment(cut, text))


@functools.lru_cache(maxsize=65_536)
def _segment_block(cut: Callable[[str], list[str]], block: str) -> tuple[str, ...]:
    return tuple(cut(block))


def _segment(cut: Callable[[str], list[str]], text: str) -> list[str]:
    """``cut(text)`` block by block, for texts of any length: jieba segments each run of its
    ``re_han_default`` (Han characters, Latin letters, digits, ``+#&._%-``) and each piece
    between them on its own, and search mode adds sub-words word by word, so a text's words are
    its blocks' words in order. A block is segmented once (``_segment_block``): a judge reads the
    same chunks joined differently for many queries, most of their blocks seen before."""
    import jieba

    out: list[str] = []
    for block in jieba.re_han_default.split(text):
        if block:  # jieba skips the empty pieces of the split too
            out.extend(_segment_block(cut, block))
    return out


def exact_words(text: str) -> list[str]:
    """``jieba.lcut(text)`` (exact mode, every character in one word, in order) through the
    blocks ``JiebaTokenizer`` keeps: the lexical judge cuts the same context sentences for its
    terms and for its values' neighbours."""
    import jieba

    return _segment(jieba.lcut, text)


class JiebaTokenizer:
    segments_chinese = True  # rag_lab.tokenizer.script: no warning on a Chinese corpus

    def __init__(
        self,
        mode: str = "search",
        lowercase: bool = True,
        stopwords: Sequence[str] | None = None,
        keep_hyphenated: bool = True,
    ) -> None:
        self.mode = choice(mode, "mode", ("search", "exact"))
        self.lowercase = boolean(lowercase, "lowercase")
        self.stopwords = frozenset(stopwords or ())
        # jieba splits "HX-200" into "HX", "-", "200"; keep the hyphenated code as one extra term.
        self._hyphenated = (
            re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+")
            if boolean(keep_hyphenated, "keep_hyphenated")
            else None
        )

    @functools.cached_property
    def _cut(self) -> Callable[[str], list[str]]:
        """jieba's segmenter, imported at the first text (a warm run whose BM25 results all come
        from the stage cache segments nothing: ~30 ms of import saved per process)."""
        import jieba

        jieba.setLogLevel(logging.WARNING)
        return jieba.lcut_for_search if self.mode == "search" else jieba.lcut

    def __call__(self, texts: Sequence[str]) -> list[list[str]]:
        out = []
        for text in texts:
            if self.lowercase:
                text = text.lower()
            words = (
                _segment_short(self._cut, text)
                if len(text) <= _SHORT
                else _segment(self._cut, text)
            )
            toks = [t for t in (w.strip() for w in words) if t and _KEEP.search(t)]
            if self._hyphenated is not None:
                toks.extend(self._hyphenated.findall(text))
            out.append([t for t in toks if t not in self.stopwords])
        return out
