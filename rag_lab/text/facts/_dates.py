"""Dates (``rag_lab.text.facts``): month names, the date patterns (``2018年5月24日``,
``2018-05-24``, ``May 24th, 2018`` …) and a date's (year, month, day) read from a match."""

from __future__ import annotations

import re

from rag_lab.text.facts._units import _alternation

MONTHS: dict[str, int] = {
    name: i
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_WEEKDAYS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday "
    "mon tue tues wed thu thur thurs fri sat sun".split()
)

_MONTH = _alternation(MONTHS)

_ORD = r"(?:st|nd|rd|th)?"
_DATES = (
    # 2018-05-24, 2018/5/24, 2018.05.24
    (re.compile(r"(?<![\d.])(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d|\.\d)"), "ymd"),
    # 2018年5月24日, 2018年5月, 2018年
    (
        re.compile(r"(?<!\d)(\d{4})\s?年(?:\s?(\d{1,2})\s?月(?:\s?(\d{1,2})\s?[日号])?)?"),
        "ymd",
    ),
    # 5月24日, 5月 (not 5个月)
    # (also after a word ending in 年: 同年5月10日, 当年5月)
    (re.compile(r"(?<!\d)(?<!\d年)(?<!\d\s年)()(\d{1,2})\s?月(?:\s?(\d{1,2})\s?[日号])?"), "ymd"),
    # may 24th, 2018 / may 24 / may 2018
    (
        re.compile(
            rf"(?<![a-z])({_MONTH})\.?\s(\d{{1,2}}){_ORD}(?![0-9a-z])(?:,?\s(\d{{4}})(?!\d))?"
        ),
        "mdy",
    ),
    # 24th may 2018 / 24 of may, 2018
    (
        re.compile(
            rf"(?<![0-9a-z.])(\d{{1,2}}){_ORD}\s(?:of\s)?({_MONTH})(?![a-z])\.?(?:,?\s(\d{{4}})(?!\d))?"
        ),
        "dmy",
    ),
    # may 2018
    (re.compile(rf"(?<![a-z])({_MONTH})\.?,?\s(?:of\s)?(\d{{4}})(?!\d)"), "my"),
)

Date = tuple[int | None, int | None, int | None]


def _dates(norm: str) -> tuple[list[tuple[re.Match[str], Date]], str]:
    """The dates of a normalised text and the text with them blanked out (same length)."""
    found: list[tuple[re.Match[str], Date]] = []
    chars = list(norm)
    for rx, order in _DATES:
        for m in rx.finditer("".join(chars)):
            date = _date_value(m, order)
            if date is None:
                continue
            found.append((m, date))
            chars[m.start() : m.end()] = " " * (m.end() - m.start())
    found.sort(key=lambda f: f[0].start())
    return found, "".join(chars)


def _date_value(m: re.Match[str], order: str) -> Date | None:
    g = m.groups()
    if order == "ymd":
        y, mo, d = (int(x) if x else None for x in g)
    elif order == "mdy":
        mo, d, y = MONTHS[g[0]], int(g[1]), int(g[2]) if g[2] else None
    elif order == "my":
        mo, d, y = MONTHS[g[0]], None, int(g[1])
    else:  # dmy
        d, mo, y = int(g[0]), MONTHS[g[1]], int(g[2]) if g[2] else None
    if (mo is not None and not 1 <= mo <= 12) or (d is not None and not 1 <= d <= 31):
        return None
    if y is not None and not 1000 <= y <= 2999:
        return None
    if "may" in g and y is None:
        return None  # "may 3", "5 may fail": the verb; a date only with its year
    return y, mo, d
