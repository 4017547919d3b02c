"""Checkable facts in an answer: numbers (with an adjacent unit), fault / model codes, clause ids.

Both sides are compared after ``normalise_text`` (NFKC, case folding, whitespace collapsing) and
with thousands separators removed ("3,000" == "3000"). A fact is found in a context when it occurs
there on token boundaries: "70" is not found in "170" or "70.5", "E102" is not found in "E1020".

- number: ``70``, ``2.5``, ``364.6``; with a unit when one follows directly ("70 °C", "3000 h",
  "8 MPa", "364.6公里"); a CJK character right after a number counts as its unit ("7卷").
  Units of one group are interchangeable ("3000 h" == "3000小时"); a number with a unit needs
  that unit in the context, a bare number only the number.
- code: a token mixing letters and digits (``E102``, ``SV0432``, ``HX-200``, ``0x1020``,
  ``v2.5``); a hyphen or space between its letter and digit runs is optional on either side
  ("HX200" == "HX-200" == "E-102" style variants of the same code).
- clause: dotted ids with three or more parts (``4.2.1``) and ``第3条``-style ids (条章节款项).

Not handled: spelled-out or Chinese numerals (三千), ranges written differently, unit conversions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from rag_lab.text import CJK, normalise_text

# One group per unit; the first spelling names the group. Longest spellings are tried first.
UNIT_GROUPS: tuple[tuple[str, ...], ...] = (
    ("°c", "摄氏度", "度"),
    ("°f",),
    ("%", "percent", "百分之"),
    ("‰",),
    ("h", "hr", "hrs", "hour", "hours", "小时"),
    ("min", "mins", "minute", "minutes", "分钟"),
    ("s", "sec", "second", "seconds", "秒"),
    ("ms", "毫秒"),
    ("d", "day", "days", "天", "日"),
    ("mpa", "兆帕"),
    ("kpa", "千帕"),
    ("pa", "帕"),
    ("bar",),
    ("psi",),
    ("v", "伏", "伏特"),
    ("kv", "千伏"),
    ("mv", "毫伏"),
    ("ma", "毫安"),
    ("w", "瓦"),
    ("kw", "千瓦"),
    ("hz", "赫兹"),
    ("khz",),
    ("mhz",),
    ("rpm", "转/分"),
    ("n·m", "nm", "牛·米"),
    ("kn",),
    ("n", "牛"),
    ("mm", "毫米"),
    ("cm", "厘米"),
    ("m", "米"),
    ("km", "公里", "千米"),
    ("kg", "公斤", "千克"),
    ("g", "克"),
    ("mg", "毫克"),
    ("t", "吨"),
    ("l", "升"),
    ("ml", "毫升"),
    ("db", "分贝"),
    ("gb",),
    ("mb",),
    ("kb",),
    ("年",),
    ("月",),
    ("个",),
    ("次",),
    ("元",),
    ("万",),
    ("亿",),
    ("人",),
    ("岁",),
    ("倍",),
    ("座",),
    ("名",),
    ("种",),
    ("位",),
    ("届",),
    ("部",),
    ("页",),
)
_GROUP_OF = {u: g for g in UNIT_GROUPS for u in g}
_UNIT = "|".join(
    re.escape(u).replace("°", "°\\s?") for u in sorted(_GROUP_OF, key=len, reverse=True)
)
# A CJK character right after a number is its measure word (7卷, 20张) even when not a listed unit.
_NUMBER = re.compile(
    rf"(?<![0-9a-z.])(\d+(?:\.\d+)*)(?:\s?({_UNIT})(?![a-z])|([{CJK}]))?(?![0-9a-z])"
)
_CODE = re.compile(r"(?<![0-9a-z])[a-z0-9]+(?:[-.][a-z0-9]+)*(?![0-9a-z])")
_CLAUSE_ZH = re.compile(r"第\s?[0-9一二三四五六七八九十百千零〇两]+\s?[条章节款项]")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def normalise_facts_text(text: str) -> str:
    """The form both sides are compared in."""
    return _THOUSANDS.sub("", normalise_text(text))


@dataclass(frozen=True)
class Fact:
    """``text`` as it appears in the (normalised) answer; ``kind``: number | code | clause."""

    kind: str
    text: str
    pattern: str  # regex that finds the fact in a normalised context

    def found_in(self, normalised_context: str) -> bool:
        return _compiled(self.pattern).search(normalised_context) is not None


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def extract_facts(text: str) -> list[Fact]:
    """Facts of ``text`` in order of appearance, deduplicated."""
    norm = normalise_facts_text(text)
    facts: list[Fact] = []
    for m in _NUMBER.finditer(norm):
        num, unit = m.group(1), m.group(2) or m.group(3)
        kind = "clause" if num.count(".") >= 2 else "number"
        pattern = rf"(?<![0-9a-z.]){re.escape(num)}(?![0-9]|[.,]\d)"
        if unit:
            unit = re.sub(r"\s", "", unit)
            spellings = sorted(_GROUP_OF.get(unit, (unit,)), key=len, reverse=True)
            alts = "|".join(re.escape(u).replace("°", "°\\s?") for u in spellings)
            pattern += rf"\s?(?:{alts})(?![a-z])"
        facts.append(Fact(kind, m.group(0), pattern))
    numbers_with_units = {m.group(0).replace(" ", "") for m in _NUMBER.finditer(norm) if m.group(2)}
    for m in _CODE.finditer(norm):
        code = m.group(0)
        if not (re.search(r"[a-z]", code) and re.search(r"\d", code)) or code in numbers_with_units:
            continue
        # letter / digit runs may be separated by a hyphen or space on either side: HX200 == HX-200
        runs = re.findall(r"[a-z]+|\d+|\.", code)
        pattern = r"(?<![0-9a-z])" + r"[-\s]?".join(re.escape(r) for r in runs) + r"(?![0-9a-z])"
        facts.append(Fact("code", code, pattern))
    for m in _CLAUSE_ZH.finditer(norm):
        body = re.sub(r"\s", "", m.group(0))
        facts.append(Fact("clause", body, r"\s?".join(re.escape(c) for c in body)))
    return list(dict.fromkeys(facts))
