"""English analysis: lower-case, word regex, stopwords, Snowball stemming (PyStemmer).

Mirrors the analysis behind bm25s' published BEIR numbers (``bm25s.tokenize(..., stopwords="en",
stemmer=Stemmer("english"))``): tokens are runs of >= 2 word characters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rag_lab.validate import OptionError, boolean


class EnglishTokenizer:
    def __init__(
        self,
        stopwords: str | Sequence[str] | None = "en",
        stemmer: str | None = "english",
        lowercase: bool = True,
        pattern: str = r"(?u)\b\w\w+\b",
    ) -> None:
        self.lowercase = boolean(lowercase, "lowercase")
        try:
            self.pattern = re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise OptionError("pattern", pattern, f"not a regular expression ({exc})") from None
        if isinstance(stopwords, str):
            from bm25s.stopwords import STOPWORDS_EN  # the list bm25s uses for "en"

            if stopwords != "en":
                raise ValueError(
                    f"unknown stopword list {stopwords!r}; give 'en' or a list of words"
                )
            stopwords = STOPWORDS_EN
        self.stopwords = frozenset(stopwords or ())
        self._stemmer = None
        if stemmer:
            import Stemmer

            self._stemmer = Stemmer.Stemmer(stemmer)
        self._stem_cache: dict[str, str] = {}

    def _stem(self, words: list[str]) -> list[str]:
        if self._stemmer is None:
            return words
        cache = self._stem_cache
        missing = list({w for w in words if w not in cache})
        if missing:
            cache.update(zip(missing, self._stemmer.stemWords(missing), strict=True))
        return [cache[w] for w in words]

    def __call__(self, texts: Sequence[str]) -> list[list[str]]:
        out = []
        for text in texts:
            if self.lowercase:
                text = text.lower()
            words = [w for w in self.pattern.findall(text) if w not in self.stopwords]
            out.append(self._stem(words))
        return out
