"""Chinese numerals (``rag_lab.text.facts``): a run of numerals read as a number
(``chinese_number``), the runs that state one written in digits (``chinese_numerals``) and
Chinese fractions as percentages (百分之七十 is 70%)."""

from __future__ import annotations

import re

from rag_lab.text.facts._units import _GROUP_OF, CLASSIFIERS, UNIT_GROUPS

# a Chinese fraction states a share: 百分之七十 is 70%, 四分之一 25% (not "4分", four minutes)
_ZH_FRACTION = re.compile(
    r"(?<![0-9.零〇一二两三四五六七八九十百千万])([0-9.]+|[零〇一二两三四五六七八九十百千万]+)分之"
    r"([0-9.]+|[零〇一二两三四五六七八九十百点]+)"
)


def _percentage(m: re.Match[str]) -> str:
    """``m`` (``_ZH_FRACTION``) as a percentage, or as it is when a part is no number."""
    parts = []
    for text in m.groups():
        if text[0].isdigit():
            try:
                parts.append(float(text))
            except ValueError:
                return m.group(0)
        else:
            value = chinese_number(text)
            if value is None:
                return m.group(0)
            parts.append(value)
    whole, part = parts
    if whole == 0:
        return m.group(0)
    return f"{part / whole * 100:.1f}".rstrip("0").rstrip(".") + "%"


_ZH_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
_ZH_SMALL = {"十": 10, "百": 100, "千": 1000}
_ZH_BIG = {"万": 10**4, "亿": 10**8}
_ZH_RUN = re.compile(
    "(第\\s?)?(?<![0-9.零〇一二两三四五六七八九十百千万亿几])"
    "([零〇一二两三四五六七八九十百千万亿]+(?:点[零〇一二三四五六七八九]+)?)"
    "(?![零〇一二两三四五六七八九十百千万亿几多余])"
)
# what makes a run of numerals a number: a unit or measure word after it (三小时, 五位, 四车道),
# 月 / 日 / 号 of a date, or 第 before it (第六届, 第二台阶); 首 + a measure word is 第一 (首次)
_ZH_UNITS = sorted((u for g in UNIT_GROUPS for u in g if not u.isascii()), key=len, reverse=True)
_ZH_AFTER = re.compile(rf"\s?(?:{'|'.join(_ZH_UNITS)}|月|日|号)")
_ZH_FIRST = re.compile(
    "(?<![零〇一二两三四五六七八九十百千万亿])首(?=[次位名批款"
    + "".join(sorted(CLASSIFIERS - {"首", "人"}))
    + "])"
)
# 首度 / 首回 ("for the first time") is 第一次 too
_ZH_FIRST_TIME = re.compile("(?<![零〇一二两三四五六七八九十百千万亿])首[度回]")
# a lone 一 is a number only before a unit of measurement (一小时), not before these
_ZH_ONE_NOT_BEFORE = frozenset((None, *CLASSIFIERS, "d", "week", "month", "year", "次"))
# a lone 两 before a measure word (两人, 两个, 两座) is often "the two" / "both" in an answer ("两人
# 打成7比7"): a count only in a context, so that the context's 两人 supports an answer's 2人
_ZH_TWO_NOT_BEFORE = frozenset((*CLASSIFIERS, "次"))
# 千 before 米 / 瓦 / 克 … may be the unit's (三千米: 3000 m or 3 km): such a run is not read
_KILO_UNITS = "米瓦克伏帕赫欧牛焦卡"
# numerals that are words, not quantities: 十分 (very), 十字, 一度 (once), 万一
_ZH_NOT_NUMBERS = re.compile("十分(?!钟)|十字|一度|万一|一一")


def chinese_number(numerals: str) -> float | None:
    """The value of a Chinese numeral (``二十五`` 25, ``两万五千`` 25000, ``一百零五`` 105,
    ``三点五`` 3.5, ``二〇一八`` 2018); None when it is not one number (``三四``, ``一一``)."""
    whole, _, frac = numerals.partition("点")
    if len(whole) >= 2 and all(c in _ZH_DIGITS for c in whole) and "两" not in whole:
        value = float("".join(str(_ZH_DIGITS[c]) for c in whole)) if len(whole) == 4 else None
        if value is None:
            return None  # digit by digit: only a year (二〇一八)
    else:
        total = section = 0
        digit: int | None = None
        if not whole or whole[0] in _ZH_BIG or whole[0] == "零":
            return None
        for c in whole:
            if c in _ZH_DIGITS:
                if digit not in (None, 0):
                    return None
                digit = _ZH_DIGITS[c]
            elif c in _ZH_SMALL:
                if digit == 0:
                    return None
                section += (1 if digit is None else digit) * _ZH_SMALL[c]
                digit = None
            else:
                big = _ZH_BIG[c]
                part = section + (digit or 0)
                if part == 0:
                    return None
                total = (total + part) * big if big > 10**4 else total + part * big
                section, digit = 0, None
        value = float(total + section + (digit or 0))
    if frac:
        value += float("0." + "".join(str(_ZH_DIGITS[c]) for c in frac))
    return value


def chinese_numerals(norm: str, first: bool = False) -> str:
    """``norm`` with the Chinese numerals that state a number written in digits (rules at
    ``_ZH_AFTER``): 双洞四车道 -> 双洞4车道, 第六届 -> 第6届, 三小时 -> 3小时 (``first``: also
    首次 -> 第1次). A
    lone 一 stays unless 第 or a unit of measurement follows (一个, 一座城市, 一天 are no counts),
    and so do numeral words (十分, 一度)."""
    if not _HAN_NUMERAL.search(norm):  # fast path
        return norm
    if first:
        norm = _ZH_FIRST_TIME.sub("第一次", norm)
        norm = _ZH_FIRST.sub("第一", norm)
    blocked = {i for m in _ZH_NOT_NUMBERS.finditer(norm) for i in range(m.start(), m.end())}

    def digits(m: re.Match[str]) -> str:
        ordinal, run = m.group(1), m.group(2)
        if m.start(2) in blocked:
            return m.group(0)
        after = _ZH_AFTER.match(norm, m.end())
        if not ordinal and after is None:
            return m.group(0)
        unit = after.group(0).strip() if after else ""
        if run == "一" and not ordinal and _GROUP_OF.get(unit) in _ZH_ONE_NOT_BEFORE:
            return m.group(0)
        if run == "两" and not ordinal and not first and _GROUP_OF.get(unit) in _ZH_TWO_NOT_BEFORE:
            return m.group(0)
        if run[-1] == "千" and unit[:1] in tuple(_KILO_UNITS):
            return m.group(0)
        value = chinese_number(run)
        if value is None or (len(run) == 1 and run in "百千万亿" and not ordinal):
            return m.group(0)
        text = f"{value:.6f}".rstrip("0").rstrip(".")
        # kept apart from a Latin letter or digit before it: "3d两种" -> "3d 2种", not "3d2种"
        glued = not ordinal and m.start() > 0 and norm[m.start() - 1] in _ALNUM
        return (ordinal or "") + (" " if glued else "") + text

    return _ZH_RUN.sub(digits, norm)


_ALNUM = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")
_HAN_NUMERAL = re.compile("[零〇一二两三四五六七八九十百千万亿首]")
