"""The form both sides of a fact comparison are read in (``normalise_facts_text``):
thousands separators, Chinese numerals and fractions, a unit stated once for two values, the
forms a context writes a value in; and letters folded to their base (``fold_surface``)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from rag_lab.text import normalise_text
from rag_lab.text.facts._chinese import _ZH_FRACTION, _percentage, chinese_numerals
from rag_lab.text.facts._units import _END, _MAGNITUDE, _UNIT, _WORDS_EN, SPELLED

_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# thousands separated by a space ("10 729 participants", NFKC turns a thin space into one): a
# run of 1-3 digits followed by groups of exactly three, no decimal point on either side
_SPACED_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?: \d{3})+(?![\d]|[.,]\d)")


@lru_cache(maxsize=8192)
def normalise_facts_text(text: str, context: bool = True) -> str:
    """The form both sides are compared in: ``normalise_text`` of ``fold_surface``, thousands
    separators dropped (commas, and spaces between groups of three digits: "10 729"), Chinese
    numerals that state a number written in digits (``chinese_numerals``; ``context``: also 首 +
    a measure word as 第1, which only a context gets, so that "首次" supports an answer's
    "第一次" while an answer's "首个" is no fact). Kept per text: a chunk's sentences come back
    for many queries."""
    if context:
        text = _context_forms(text)
    norm = _THOUSANDS.sub("", normalise_text(fold_surface(text)))
    norm = _SPACED_THOUSANDS.sub(lambda m: m.group(0).replace(" ", ""), norm)
    if "分之" in norm:
        norm = _ZH_FRACTION.sub(_percentage, norm)
    norm = chinese_numerals(norm, first=context)
    return _shared_units(norm, lists=context)


# forms a context writes a value in that an answer writes plainly (``_context_forms``): a
# footnote digit glued to a year before the next sentence ("since 1992.1 Such"), a code with the
# prefix h of "human" ("hIL-10": human IL-10; mRNA-1273 is no m + RNA-1273), a percentage spelt
# out ("Seventy-five percent") or stated as a bare number after "percentage" ("this percentage
# rose to 32")
_FOOTNOTE_YEAR = re.compile(r"(?<![\d.])((?:1[5-9]|20)\d\d)\.\d{1,2}(?=\s+[A-Z])")
_PREFIXED_CODE = re.compile(r"(?<![A-Za-z0-9-])h([A-Z]{2,}-?\d+[A-Za-z]?)(?![A-Za-z0-9])")
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SPELLED_PERCENT = re.compile(
    rf"(?<![A-Za-z-])(?:({'|'.join(_TENS)})(?:[\s-]({'|'.join(_WORDS_EN[1:10])}))?"
    rf"|({'|'.join(_WORDS_EN[1:])}))(?=\s(?:percent|per\scent)\b)",
    re.IGNORECASE,
)
_PERCENTAGE_TO = re.compile(
    r"\b(percentage\b[^.;:,()]{0,40}?\b(?:to|was|of|reached|is)\s)(\d+(?:\.\d+)?)"
    r"(?!\d|\.\d|\s?(?:%|percent|per\scent))",
    re.IGNORECASE,
)


def _context_forms(text: str) -> str:
    """A context's raw text with the forms of ``_FOOTNOTE_YEAR`` … written as an answer would:
    the footnote digit dropped, the bare code added after the prefixed one ("hIL-10 IL-10"),
    the percentage in digits with its sign."""
    text = _FOOTNOTE_YEAR.sub(r"\1.", text)
    text = _PREFIXED_CODE.sub(lambda m: f"{m.group(0)} {m.group(1)}", text)

    def spelled(m: re.Match[str]) -> str:
        if m.group(3):
            return str(SPELLED[m.group(3).lower()])
        tens = (_TENS.index(m.group(1).lower()) + 2) * 10
        return str(tens + (SPELLED[m.group(2).lower()] if m.group(2) else 0))

    text = _SPELLED_PERCENT.sub(spelled, text)
    return _PERCENTAGE_TO.sub(r"\1\2%", text)


# a unit or magnitude stated once for two values ("25.9 ± 3.3 kg", "45.1 (SD 8.5) years",
# "19.5和18.5亿年", "20-40 years"): the first value gets it too (``_shared_units``)
_VALUE = r"(\d+(?:\.\d+)?)"
_UNIT_AFTER = rf"(\s?(?:{_MAGNITUDE})(?:{_END}))?(\s?(?:{_UNIT})(?:{_END}))?"
_PLUS_MINUS = re.compile(rf"(?<![\d.a-z]){_VALUE}(\s?(?:±|\+/-|\+-)\s?){_VALUE}{_UNIT_AFTER}")
_PARENTHESIS = re.compile(
    rf"(?<![\d.a-z]){_VALUE}(\s?\((?:(?:sd|se|sem|iqr|range|95%\s?ci|ci)[\s:=,]*)?"
    rf"\d+(?:\.\d+)?(?:\s?(?:-|–|to|,)\s?\d+(?:\.\d+)?)?\)\s?){_UNIT_AFTER}"
)
_RANGE = re.compile(rf"(?<![\d.a-z]){_VALUE}(\s?(?:至|到|to|-|–|~)\s?){_VALUE}{_UNIT_AFTER}")
_LIST = re.compile(
    rf"(?<![\d.a-z]){_VALUE}(\s?(?:和|与|或|至|到|、|and|or|to|-|–|~)\s?){_VALUE}{_UNIT_AFTER}"
)


def _shared_units(norm: str, lists: bool = True) -> str:
    """``norm`` with a unit or magnitude stated after the second of two values joined by ±, a
    range mark (78至90座, "20-40 years") or after a value's parenthetical statistic also written
    after the first value; ``lists`` (a context's text): also after the first of two values
    joined by a list word ("25.9 and 25.2 kg/m²"; an answer's list may leave the unit to the
    last value only when the context gives the others none)."""

    def pair(m: re.Match[str]) -> str:  # groups: value, joint, value, magnitude, unit
        suffix = (m.group(4) or "") + (m.group(5) or "")
        if not suffix:
            return m.group(0)
        # spaced: "20 years - 40 years" (a number after "s-" would read as a code's)
        return f"{m.group(1)} {suffix.strip()} {m.group(2).strip()} {m.group(3)}{suffix}"

    def statistic(m: re.Match[str]) -> str:  # groups: value, (statistic), magnitude, unit
        suffix = (m.group(3) or "") + (m.group(4) or "")
        if not suffix:
            return m.group(0)
        return f"{m.group(1)} {suffix.strip()}{m.group(2)}{suffix.strip()}"

    norm = _PLUS_MINUS.sub(pair, _PARENTHESIS.sub(statistic, norm))
    return (_LIST if lists else _RANGE).sub(pair, norm)


_LETTERS = str.maketrans(
    {
        "ø": "o",
        "Ø": "O",
        "æ": "ae",
        "Æ": "Ae",
        "œ": "oe",
        "Œ": "Oe",
        "ß": "ss",
        "ł": "l",
        "Ł": "L",
        "đ": "d",
        "Đ": "D",
        "þ": "th",
        "Þ": "Th",
        "ı": "i",
    }  # fmt: skip
)
_COMPASS = re.compile(r"\b([Nn]orth|[Ss]outh|NORTH|SOUTH)[\s-]([Ee]ast|[Ww]est|EAST|WEST)\b")


def fold_surface(text: str) -> str:
    """Surface forms that name the same thing made one: accented Latin letters without their
    accents (Khloé ~ Khloe, Makedonía ~ Makedonia, Bøjden ~ Bojden) and compass words joined
    (South East ~ South-East ~ Southeast). Other scripts are left as they are."""
    if not text.isascii():
        text = "".join(
            "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
            if "\u00c0" <= ch <= "\u024f" or "\u1e00" <= ch <= "\u1eff"
            else ch
            for ch in text.translate(_LETTERS)
        )
    return _COMPASS.sub(lambda m: m.group(1) + m.group(2).lower(), text)
