"""``tokenizer=auto``: jieba for a Chinese corpus, the English analyser otherwise.

The choice is made once per corpus from the share of Han characters among the letters of a
sample (``rag_lab.tokenizer.script``). ``rag_lab.pipeline.build.build_pipeline`` makes it from the
corpus files before anything is built, and puts the chosen option's config in place of this one, so
the stage cache is keyed by the resolved choice (``tokenizer=auto`` on a Chinese corpus shares
``tokenizer=jieba``'s entries) and the run log says which was chosen. An instance built some other
way (a generator's tokenizer) decides on the texts of its first call instead.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from rag_lab.tokenizer.base import Tokenizer
from rag_lab.tokenizer.script import CJK_CORPUS_SHARE, SAMPLE_CHARS, cjk_share
from rag_lab.validate import OptionError, integer, number

log = logging.getLogger(__name__)

CHOICES = ("chinese", "other")


def choose(share: float | None, min_cjk_share: float = CJK_CORPUS_SHARE) -> str:
    """``chinese`` when the sample's Han share is at least ``min_cjk_share``, else ``other``."""
    return "chinese" if share is not None and share >= min_cjk_share else "other"


class AutoTokenizer:
    """Args:
    tokenizers: ``{chinese: Tokenizer, other: Tokenizer}`` (conf: the ``jieba`` and ``english``
        options).
    min_cjk_share: the Han share of the corpus sample from which it counts as Chinese.
    sample_chars: characters of the corpus sampled.
    """

    def __init__(
        self,
        tokenizers: Mapping[str, Tokenizer],
        min_cjk_share: float = CJK_CORPUS_SHARE,
        sample_chars: int = SAMPLE_CHARS,
    ) -> None:
        if sorted(tokenizers) != sorted(CHOICES):
            raise OptionError("tokenizers", sorted(tokenizers), "give exactly chinese and other")
        self.tokenizers = dict(tokenizers)
        self.min_cjk_share = number(min_cjk_share, "min_cjk_share", ge=0, le=1)
        self.sample_chars = integer(sample_chars, "sample_chars", ge=1)
        self.chosen: str | None = None

    def __call__(self, texts: Sequence[str]) -> list[list[str]]:
        if self.chosen is None:
            share = cjk_share(texts, self.sample_chars)
            self.chosen = choose(share, self.min_cjk_share)
            log.info(
                "tokenizer=auto: %s (%s) from the first %d texts it was given (Han share %s)",
                self.chosen,
                type(self.tokenizers[self.chosen]).__name__,
                len(texts),
                "n/a" if share is None else f"{share:.2f}",
            )
        return self.tokenizers[self.chosen](texts)
