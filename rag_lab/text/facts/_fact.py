"""A fact (``Fact``) and its support in a context (``ContextFacts``, ``context_facts``); the
facts of a normalised text but its names with their spans (``spanned_facts``): numbers, scores,
dates, codes, clause ids and rate units."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from rag_lab.text.facts._dates import Date, _dates
from rag_lab.text.facts._units import (
    _IMPLICIT_UNITS,
    _NUMBER,
    _PER,
    _RATE_SPELLINGS,
    _SPELLED,
    _key,
    _number_value,
    _spelled_value,
    _unit_pattern,
    same_unit,
)

_DOTTED_CLAUSE = re.compile(r"(?<![0-9a-z.])\d+(?:\.\d+){2,}(?![0-9a-z]|\.\d)")

_CODE = re.compile(r"(?<![0-9a-z])[a-z0-9]+(?:[-.][a-z0-9]+)*(?![0-9a-z])")
_CODE_WORD_SUFFIX = re.compile(r"(?:-[a-z]{3,})+$")
# a single Latin letter next to a Han character, not inside a Latin word or a number: 风云四号B星,
# "，A股", "长征二号F（" (only in text holding Han characters)
_LETTER_ID = re.compile(
    r"(?<![0-9a-z.+-])[a-z](?=[\u4e00-\u9fff])|(?<=[\u4e00-\u9fff])[a-z](?![0-9a-z.+-])"
)
# a score or ratio is one fact: "3比0" is not supported by a 3 and a 0 elsewhere ("3:0" == "3比0")
_SCORE = re.compile(r"(?<![\d.:])(\d+)\s?[比:]\s?(\d+)(?![\d]|[.:]\d)")
_CLAUSE_ZH = re.compile(r"第\s?[0-9一二三四五六七八九十百千零〇两]+\s?[条章节款项]")
# 条 / 项 / 款 … are measure words too: 第二条跑道 is "the second runway". A 第N条 is a clause id
# when the text is about a legal or standard text (_LEGAL) or nothing but a clause word follows
# it (第3条。, 第3条规定); else it is an ordinal, a bare number (第2条跑道 states 2)
_LEGAL = re.compile(
    "法律|法规|法典|法案|法》|法第|条例|规定|规则|规范|标准|办法|章程|合同|协议|公约|条约|细则|守则|《"
)
_CLAUSE_FOLLOWERS = frozenset("规中的之款项第和及与或、")


def _blank_clauses(text: str) -> str:
    """``text`` with its clause ids (dotted, 第3条) blanked out and the measure word of a 第N条
    that is an ordinal (``_LEGAL``) blanked, so that its number is bare (same length)."""
    text = _blank(text, _DOTTED_CLAUSE)
    legal = _LEGAL.search(text) is not None
    chars = list(text)
    for m in _CLAUSE_ZH.finditer(text):
        start = m.start() if _is_clause(text, m, legal) else m.end() - 1
        chars[start : m.end()] = " " * (m.end() - start)
    return "".join(chars)


def _is_clause(text: str, m: re.Match[str], legal: bool) -> bool:
    nxt = text[m.end() : m.end() + 1]
    return legal or not (_HAN.match(nxt) and nxt not in _CLAUSE_FOLLOWERS)


@dataclass(frozen=True)
class Fact:
    """``text`` as it appears in the (normalised) answer; ``kind``: number | date | code |
    clause | name. ``number``: the value (magnitude applied) and its unit group (None: bare);
    ``date``: (year, month, day), None for parts not stated."""

    kind: str
    text: str
    pattern: str = field(default="", compare=False)  # regex for codes, clauses and names
    number: tuple[float, str | None] | None = None
    date: Date | None = None
    unit: str | None = None  # kind "unit": the unit group of a rate ("per second", "每小时")

    def found_in(self, normalised_context: str) -> bool:
        """Whether a context (``normalise_facts_text``) supports this fact (rules: module
        docstring)."""
        return context_facts(normalised_context).supports(self)


@dataclass(frozen=True)
class ContextFacts:
    """The numbers and dates of one normalised context, parsed once."""

    text: str
    numbers: dict[float, frozenset[str | None]]  # value -> unit groups it occurs with
    dates: tuple[Date, ...]

    def supports(self, fact: Fact) -> bool:
        if fact.number is not None:
            value, unit = fact.number
            units = self.numbers.get(value)
            return units is not None and (
                unit is None
                or any(same_unit(unit, u) for u in units)
                or (unit in _IMPLICIT_UNITS and None in units)
            )
        if fact.date is not None:
            return self._has_date(fact.date)
        if fact.unit is not None and any(fact.unit in units for units in self.numbers.values()):
            return True
        return _compiled(fact.pattern).search(self.text) is not None

    def _has_date(self, date: Date) -> bool:
        y, m, d = date
        if m is None and d is None:
            return y is not None and float(y) in self.numbers
        for cy, cm, cd in self.dates:
            if (m is not None and cm != m) or (d is not None and cd != d):
                continue
            if y is None or cy == y or (cy is None and float(y) in self.numbers):
                return True
        return False


_INSTITUTE = re.compile(r"(?<![0-9a-z.])(\d+)(?=研究所|设计所)")


@lru_cache(maxsize=256)
def context_facts(normalised_context: str) -> ContextFacts:
    numbers: dict[float, set[str | None]] = {}
    dates, rest = _dates(normalised_context)
    rest = _blank_clauses(rest)
    # a date's year also states the bare number (2019 in "12 March 2019"); its day and month do
    # not ("10月16日" states no count of 16)
    for _, (year, _m, _d) in dates:
        if year is not None:
            numbers.setdefault(float(year), set()).add(None)
    for m in _NUMBER.finditer(rest):
        value, unit = _number_value(m)
        numbers.setdefault(value, set()).add(unit)
        if m.group(2):  # "1.4万" also states the bare 1.4
            numbers.setdefault(_key(float(m.group(1))), set()).add(None)
    for m in _SPELLED.finditer(rest):
        value, unit = _spelled_value(m)
        numbers.setdefault(value, set()).add(unit)
    # an institution's number with its kind: "第702研究所" also states 702所, its usual short form
    for m in _INSTITUTE.finditer(rest):
        numbers.setdefault(_key(float(m.group(1))), set()).add("所")
    return ContextFacts(
        normalised_context,
        {v: frozenset(u) for v, u in numbers.items()},
        tuple(v for _, v in dates),
    )


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _blank(text: str, *patterns: re.Pattern[str]) -> str:
    for rx in patterns:
        text = rx.sub(lambda m: " " * len(m.group(0)), text)
    return text


def spanned_facts(norm: str) -> list[tuple[Fact, int, int]]:
    """The facts of a normalised text (``normalise_facts_text``) but its names, each with its
    span in ``norm`` (start, end), grouped by kind in the order of ``extract_facts``; a fact
    stated twice is listed twice."""
    facts: list[tuple[Fact, int, int]] = []
    dates, rest = _dates(norm)
    for m, date in dates:
        facts.append((Fact("date", m.group(0), date=date), m.start(), m.end()))
    for m in _DOTTED_CLAUSE.finditer(rest):
        pattern = rf"(?<![0-9a-z.]){re.escape(m.group(0))}(?![0-9a-z]|\.\d)"
        facts.append((Fact("clause", m.group(0), pattern), m.start(), m.end()))
    rest = _blank_clauses(rest)
    numbers = list(_NUMBER.finditer(rest))
    for m in numbers:
        facts.append((Fact("number", m.group(0), number=_number_value(m)), m.start(), m.end()))
    spelled = list(_SPELLED.finditer(rest))
    for m in spelled:
        facts.append((Fact("number", m.group(0), number=_spelled_value(m)), m.start(), m.end()))
    # a token inside a number with its unit or ordinal suffix ("3000h", "24th", "5 m2") or inside
    # a date is not a code; "per hour" inside "60 miles per hour" is no rate of its own
    in_numbers = {
        i for m in numbers + spelled + [d for d, _ in dates] for i in range(m.start(), m.end())
    }
    for m in _PER.finditer(rest):
        if m.start(1) not in in_numbers:
            group = _RATE_SPELLINGS[re.sub(r"\s+", " ", m.group(1))]
            fact = Fact("unit", m.group(0), _unit_pattern(group), unit=group)
            facts.append((fact, m.start(), m.end()))
    for m in _CODE.finditer(norm):
        # a trailing hyphenated word is no part of the code: "ip55-rated" states ip55
        code = _CODE_WORD_SUFFIX.sub("", m.group(0))
        if not (re.search(r"[a-z]", code) and re.search(r"\d", code)) or m.start() in in_numbers:
            continue
        # letter / digit runs may be separated by a hyphen or space on either side: HX200 == HX-200
        runs = re.findall(r"[a-z]+|\d+|\.", code)
        pattern = r"(?<![0-9a-z])" + r"[-\s]?".join(re.escape(r) for r in runs) + r"(?![0-9a-z])"
        facts.append((Fact("code", code, pattern), m.start(), m.start() + len(code)))
    # in Chinese text a single Latin letter before a Han character is an id: 风云四号B星, A股
    for m in _LETTER_ID.finditer(norm):
        if m.start() in in_numbers:  # the unit of "3000 h更换"
            continue
        # reported with its Han neighbour ("b星", "号f"), found as the letter standing alone
        # ("风云四号b星", "长征2号f(cz-2f)火箭")
        letter, i = m.group(0), m.start()
        shown = norm[i : i + 2] if _HAN.match(norm, i + 1) else norm[i - 1 : i + 1]
        pattern = rf"(?<![0-9a-z]){re.escape(letter)}(?![0-9a-z])"
        facts.append((Fact("code", shown, pattern), m.start(), m.end()))
    for m in _SCORE.finditer(rest):
        a, b = m.group(1), m.group(2)
        pattern = rf"(?<![\d.:]){a}\s?[比:]\s?{b}(?![\d]|[.:]\d)"
        facts.append((Fact("score", f"{a}:{b}", pattern), m.start(), m.end()))
    legal = _LEGAL.search(norm) is not None
    for m in _CLAUSE_ZH.finditer(norm):
        if not _is_clause(norm, m, legal):
            continue
        body = re.sub(r"\s", "", m.group(0))
        fact = Fact("clause", body, r"\s?".join(re.escape(c) for c in body))
        facts.append((fact, m.start(), m.end()))
    return facts


_HAN = re.compile(r"[\u4e00-\u9fff]+")
