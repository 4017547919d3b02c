"""Chinese (and mixed Chinese/English) analysis with jieba's search-engine segmentation.

``jieba.lcut_for_search`` emits both a word and its sub-words (``中华人民共和国`` → ``中华``,
``华人``, ``人民``, ``共和``, ``共和国``, ...), which raises recall for BM25. Latin-script runs
(fault codes, model numbers, English words) are kept whole and lower-cased, so ``E102`` and
``HX-200`` stay exact terms; punctuation and whitespace are dropped.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from rag_lab.validate import boolean, choice

_KEEP = re.compile(r"\w", re.UNICODE)


class JiebaTokenizer:
    segments_chinese = True  # rag_lab.tokenizer.script: no warning on a Chinese corpus

    def __init__(
        self,
        mode: str = "search",
        lowercase: bool = True,
        stopwords: Sequence[str] | None = None,
        keep_hyphenated: bool = True,
    ) -> None:
        import jieba

        jieba.setLogLevel(logging.WARNING)
        choice(mode, "mode", ("search", "exact"))
        self._cut = jieba.lcut_for_search if mode == "search" else jieba.lcut
        self.lowercase = boolean(lowercase, "lowercase")
        self.stopwords = frozenset(stopwords or ())
        # jieba splits "HX-200" into "HX", "-", "200"; keep the hyphenated code as one extra term.
        self._hyphenated = (
            re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+")
            if boolean(keep_hyphenated, "keep_hyphenated")
            else None
        )

    def __call__(self, texts: Sequence[str]) -> list[list[str]]:
        out = []
        for text in texts:
            if self.lowercase:
                text = text.lower()
            toks = [t for t in (w.strip() for w in self._cut(text)) if t and _KEEP.search(t)]
            if self._hyphenated is not None:
                toks.extend(self._hyphenated.findall(text))
            out.append([t for t in toks if t not in self.stopwords])
        return out
