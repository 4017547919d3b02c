"""Content terms of a text and which of them a context supports (generators, judges, answer
metrics).

- ``ContentTerms``: content terms of a text (jieba exact segmentation, lower-cased, stopwords and
  punctuation dropped, English words stemmed so "pumps" matches "pump").
- ``TermSupport``: which terms of a sentence a context contains. A Chinese term counts when it is a
  substring of the normalised context, because jieba may segment the same characters differently
  in a short answer and in a long paragraph; other terms must be a context term.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from rag_lab.text.normalise import normalise_text
from rag_lab.text.patterns import has_cjk

if TYPE_CHECKING:
    from rag_lab.tokenizer.base import Tokenizer

_LATIN_WORD = re.compile(r"[a-z]+")

# Function words that carry no claim. "no"/"not"/"不"/"没有" are deliberately absent: a negation
# added to an answer must count as an unsupported term.
_STOP_EN = frozenset(
    (
        "a an and are as at be been but by can could did do does for from had has have how if in "
        "into is it its may might must of on or shall should so such than that the their them then "
        "there these they this those to was were what when where which who whom whose why will "
        "with would you your i we our"
    ).split()
)
_STOP_ZH = frozenset(
    (
        "的 地 得 了 着 过 是 在 和 与 及 或 而 并 也 都 就 又 被 把 将 对 从 向 于 以 为 "
        "由 其 之 这 那 这个 那个 这些 那些 该 此 吗 呢 吧 啊 呀 么 什么 哪 哪个 哪些 "
        "哪里 哪儿 谁 多少 几 怎么 怎样 如何 为什么 请 一个 一种 有 个 所 则 即 等 上 中 下"
    ).split()
)
STOPWORDS: frozenset[str] = _STOP_EN | _STOP_ZH


# texts whose terms one ContentTerms keeps: a judge sees the same contexts for many answers, the
# answer stage the same chunks for many queries (each a few hundred bytes of terms)
TERMS_CACHE_SIZE = 16_384


class ContentTerms:
    """``text -> ordered unique content terms``. Args: ``tokenizer`` (default: jieba exact mode
    with ``STOPWORDS``); English words are Snowball-stemmed after tokenising. The terms of the
    last ``TERMS_CACHE_SIZE`` distinct texts are kept (thread-safe; the tokenizer must be a pure
    function of the text)."""

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        if tokenizer is None:
            from rag_lab.tokenizer.jieba import JiebaTokenizer

            # exact mode: search mode would add sub-words and count one claim several times
            tokenizer = JiebaTokenizer(mode="exact", keep_hyphenated=False)
        self.tokenizer = tokenizer
        self._stem = _stemmer()
        self._terms = lru_cache(maxsize=TERMS_CACHE_SIZE)(self._analyse)

    def _analyse(self, text: str) -> tuple[str, ...]:
        (toks,) = self.tokenizer([normalise_text(text)])
        terms = (
            self._stem(t) if _LATIN_WORD.fullmatch(t) else t for t in toks if t not in STOPWORDS
        )
        return tuple(dict.fromkeys(terms))

    def __call__(self, text: str) -> list[str]:
        return list(self._terms(text))

    def many(self, texts: Sequence[str]) -> list[list[str]]:
        return [list(self._terms(t)) for t in texts]


@lru_cache(maxsize=1)
def _stemmer() -> Callable[[str], str]:
    import Stemmer

    stem = Stemmer.Stemmer("english")
    return lru_cache(maxsize=65536)(stem.stemWord)


def stem(word: str) -> str:
    """The English Snowball stem ``ContentTerms`` uses ("pumps" -> "pump")."""
    return _stemmer()(word)


class TermSupport:
    """Which content terms one context supports (see the module docstring for the rule)."""

    def __init__(self, context: str, terms: ContentTerms) -> None:
        self.text = normalise_text(context)
        self.terms = frozenset(terms(context))

    def supported(self, term: str) -> bool:
        return term in self.terms or (has_cjk(term) and term in self.text)

    def share(self, terms: Iterable[str]) -> float | None:
        """Share of ``terms`` supported; None when there are no terms."""
        terms = list(terms)
        if not terms:
            return None
        return sum(self.supported(t) for t in terms) / len(terms)
