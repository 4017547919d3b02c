"""Abbreviation expansion from definitions mined in the corpus: "可编程逻辑控制器（PLC）",
"Programmable Logic Controller (PLC)", "HMI（人机界面）", "UPS (uninterruptible power supply)".

Full-width and ASCII parentheses, the abbreviation inside or outside them. An English long form
must spell the abbreviation's letters with its word initials (``of``/``and``/``the`` may sit
between); a Chinese long form is the run of Chinese characters before the parenthesis, cut by
jieba after the last word of ``cjk_stopwords`` (``采用可编程逻辑控制器`` → ``可编程逻辑控制器``)
and to at most ``max_long_chars``. A heuristic: it reads definitions, not meaning.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from rag_lab.query_transforms._expansion import Expander, expand_all
from rag_lab.types import Chunk
from rag_lab.validate import integer

log = logging.getLogger(__name__)

_ABBR = r"[A-Z][A-Za-z0-9/&-]{0,8}[A-Z0-9]"
_CJK = r"[\u4e00-\u9fff]"
_OPEN, _CLOSE = r"[（(]", r"[)）]"
_LEAD_IN = r"(?:以下简称|简称|下称|即|abbr\.?|i\.e\.)?"
# long form, then the abbreviation in parentheses
_CJK_THEN_ABBR = re.compile(rf"({_CJK}{{2,}})\s*{_OPEN}\s*{_LEAD_IN}\s*({_ABBR})\s*{_CLOSE}")
_EN_THEN_ABBR = re.compile(
    rf"((?:[A-Za-z][A-Za-z-]*[\s/]+){{0,9}}[A-Za-z][A-Za-z-]*)\s*\(\s*({_ABBR})\s*\)"
)
# the abbreviation, then the long form in parentheses
_ABBR_THEN_LONG = re.compile(
    rf"(?<![A-Za-z0-9])({_ABBR})\s*{_OPEN}\s*(?:即|全称|full name:?)?\s*([^()（）\n]{{2,60}}?)"
    rf"\s*{_CLOSE}"
)
_MINOR = frozenset({"of", "and", "the", "for", "to", "in", "on", "a", "an"})

CJK_STOPWORDS = (
    "的", "是", "为", "即", "由", "和", "与", "及", "或", "把", "将", "对", "在", "用", "经",
    "从", "其", "该", "本", "这", "采用", "使用", "通过", "称为", "叫做", "简称", "包括",
    "注意", "所谓", "一种", "一个", "各", "每",
)  # fmt: skip


def _letters(abbr: str) -> str:
    return re.sub(r"[^A-Za-z]", "", abbr).upper()


def is_abbreviation(text: str) -> bool:
    """Two or more capital letters and more letters than digits: ``PLC``, ``I/O``, ``SV7``; not
    a fault code (``E102``, ``SV0432``) or a word (``Pump``)."""
    caps = sum(ch.isupper() for ch in text)
    digits = sum(ch.isdigit() for ch in text)
    return caps >= 2 and caps > digits and caps >= len(_letters(text))


def english_long_form(candidate: str, abbr: str) -> str | None:
    """The shortest tail of ``candidate`` whose word initials spell ``abbr``'s letters, right to
    left (minor words may sit between); ``None`` when none does."""
    letters = _letters(abbr)
    words = list(re.finditer(r"[A-Za-z]+", candidate))
    j = len(letters) - 1
    start: int | None = None
    for w in reversed(words):
        if j < 0:
            break
        word = w.group()
        if word[0].upper() == letters[j]:
            j -= 1
            start = w.start()
        elif word.lower() in _MINOR and start is not None:
            continue
        else:
            return None
    if j >= 0 or start is None:
        return None
    return candidate[start:].strip()


class AbbreviationExpansion:
    """Args:
    min_count: how often a definition must be written in the corpus to be used.
    max_long_chars: longest Chinese long form (characters).
    cjk_stopwords: words after which a Chinese long form starts (the last one in the run).
    max_added: most expansions appended to one query.
    Both directions: a query naming ``PLC`` gets ``可编程逻辑控制器``, one naming
    ``可编程逻辑控制器`` gets ``PLC``. An abbreviation written with a slash also matches without
    it (``I/O`` and ``IO``). ``fit(chunks)`` (``rag_lab.protocols.CorpusFitted``, called by the
    pipeline after chunking) mines the definitions; ``pairs`` is what it found, as
    ``(abbreviation, long form, count)``. The expansions are part of the query text, so a corpus
    with other definitions gives other texts and other retriever-run cache keys.
    """

    def __init__(
        self,
        min_count: int = 1,
        max_long_chars: int = 12,
        cjk_stopwords: Sequence[str] = CJK_STOPWORDS,
        max_added: int = 8,
    ) -> None:
        self.min_count = integer(min_count, "min_count", ge=1)
        self.max_long_chars = integer(max_long_chars, "max_long_chars", ge=2)
        self.cjk_stopwords = frozenset(str(w) for w in cjk_stopwords)
        self.max_added = integer(max_added, "max_added", ge=1)
        self.pairs: tuple[tuple[str, str, int], ...] = ()
        self.expander = Expander({}, self.max_added)
        self.stats: dict[str, float] = {}

    def _cjk_long_form(self, run: str) -> str | None:
        import jieba

        words = jieba.lcut(run)
        cut = max((i + 1 for i, w in enumerate(words) if w in self.cjk_stopwords), default=0)
        kept: list[str] = []
        for w in reversed(words[cut:]):
            if sum(map(len, kept)) + len(w) > self.max_long_chars:
                break
            kept.insert(0, w)
        long = "".join(kept)
        return long if len(long) >= 2 else None

    def definitions(self, text: str) -> Iterable[tuple[str, str]]:
        """Every ``(abbreviation, long form)`` that ``text`` defines."""
        for m in _CJK_THEN_ABBR.finditer(text):
            abbr, long = m.group(2), self._cjk_long_form(m.group(1))
            if long and is_abbreviation(abbr):
                yield abbr, long
        for m in _EN_THEN_ABBR.finditer(text):
            abbr = m.group(2)
            long = english_long_form(m.group(1), abbr) if is_abbreviation(abbr) else None
            if long:
                yield abbr, long
        for m in _ABBR_THEN_LONG.finditer(text):
            abbr, inside = m.group(1), m.group(2).strip()
            if not is_abbreviation(abbr):
                continue
            if re.fullmatch(rf"{_CJK}{{2,}}", inside):
                if len(inside) <= self.max_long_chars:
                    yield abbr, inside
            elif english_long_form(inside, abbr) == inside:
                yield abbr, inside

    def fit(self, chunks: Sequence[Chunk]) -> None:
        counts: Counter[tuple[str, str]] = Counter()
        for chunk in chunks:
            counts.update(self.definitions(chunk.text))
        self.pairs = tuple(
            (abbr, long, n)
            for (abbr, long), n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))
            if n >= self.min_count
        )
        self.expander = Expander(self.table(), self.max_added)
        log.info(
            "abbreviations mined from %d chunks: %s",
            len(chunks),
            ", ".join(f"{a}={b}" for a, b, _ in self.pairs[:20]) or "none",
        )

    def table(self) -> dict[str, list[str]]:
        """The mined pairs as ``term -> [equivalents]``, both directions (and ``I/O`` as ``IO``)."""
        table: dict[str, list[str]] = {}

        def add(term: str, eq: str) -> None:
            if eq.casefold() != term.casefold() and eq not in table.setdefault(term, []):
                table[term].append(eq)

        for abbr, long, _ in self.pairs:
            spellings = [abbr, *([abbr.replace("/", "")] if "/" in abbr else [])]
            for spelling in spellings:
                add(spelling, long)
                add(long, spelling)
        return table

    def transform(self, queries: Mapping[str, str]) -> dict[str, str]:
        out, self.stats = expand_all(self.expander, queries)
        self.stats["n_pairs"] = float(len(self.pairs))
        return out
