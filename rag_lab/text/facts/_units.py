"""Numbers and their units (``rag_lab.text.facts``): the unit groups, measure words and
magnitudes, the number and spelt-out number patterns, a value read from a match, the unit of a
rate ("per second", 每小时) and whether two spellings name one unit."""

from __future__ import annotations

import re

# One group per unit; the first spelling names the group. Longest spellings are tried first.
# Only these follow a number as its unit: any other character after a number is not part of it.
UNIT_GROUPS: tuple[tuple[str, ...], ...] = (
    ("°c", "摄氏度", "度", "degrees celsius", "degree celsius", "celsius", "degrees c"),
    ("°f", "华氏度", "degrees fahrenheit", "fahrenheit", "degrees f"),
    ("%", "percent", "per cent", "pct"),
    ("‰", "per mille"),
    ("h", "hr", "hrs", "hour", "hours", "小时", "个小时", "钟头"),
    ("min", "mins", "minute", "minutes", "分钟"),
    ("s", "sec", "secs", "second", "seconds", "秒", "秒钟"),
    ("ms", "millisecond", "milliseconds", "毫秒"),
    ("d", "day", "days", "天"),
    ("week", "weeks", "周", "星期", "个星期"),
    ("month", "months", "个月"),
    ("year", "years", "yr", "yrs", "年"),  # after a 4-digit number 年 marks a date instead
    ("mpa", "兆帕"),
    ("kpa", "千帕"),
    ("pa", "帕", "帕斯卡"),
    ("bar",),
    ("psi",),
    ("v", "volt", "volts", "伏", "伏特"),
    ("kv", "千伏"),
    ("mv", "毫伏"),
    ("amp", "amps", "ampere", "amperes", "安", "安培"),
    ("ma", "毫安"),
    ("ω", "ohm", "ohms", "欧", "欧姆"),
    ("kω", "kohm", "千欧"),
    ("w", "watt", "watts", "瓦"),
    ("kw", "kilowatt", "kilowatts", "千瓦"),
    ("mw", "megawatt", "megawatts", "兆瓦"),
    ("gw", "gigawatt", "gigawatts", "吉瓦"),
    ("kwh", "千瓦时", "度电", "kilowatt hours", "kilowatt-hours"),
    ("wh", "瓦时", "watt hours", "watt-hours"),
    ("mwh", "兆瓦时", "megawatt hours", "megawatt-hours"),
    ("gwh", "吉瓦时", "gigawatt hours", "gigawatt-hours"),
    ("twh", "太瓦时", "terawatt hours", "terawatt-hours"),
    ("mah", "毫安时"),
    ("ah", "安时", "amp hours", "amp-hours"),
    ("j", "joule", "joules", "焦", "焦耳"),
    ("kj", "kilojoule", "kilojoules", "千焦"),
    ("mj", "megajoule", "megajoules", "兆焦"),
    ("kcal", "kilocalorie", "kilocalories", "千卡", "大卡"),
    ("cal", "calorie", "calories", "卡路里"),
    ("hp", "horsepower", "bhp", "马力"),
    ("hz", "hertz", "赫兹", "赫"),
    ("khz", "千赫"),
    ("mhz", "兆赫"),
    ("ghz",),
    ("rpm", "r/min", "转/分", "转/分钟", "转每分"),
    # "nm" is a nanometre or a newton metre: it matches either (``_AMBIGUOUS_UNITS``)
    ("nm",),
    ("n·m", "牛·米", "牛米", "newton metres", "newton meters"),
    ("nanometre", "nanometres", "nanometer", "nanometers", "纳米"),
    ("ns", "nanosecond", "nanoseconds", "纳秒"),
    ("μs", "microsecond", "microseconds", "微秒"),
    ("kn", "千牛"),
    ("n", "newton", "newtons", "牛", "牛顿"),
    ("μm", "micron", "microns", "微米"),
    ("mm", "millimetre", "millimetres", "millimeter", "millimeters", "毫米"),
    ("cm", "centimetre", "centimetres", "centimeter", "centimeters", "厘米"),
    ("m", "metre", "metres", "meter", "meters", "米"),
    ("km", "kilometre", "kilometres", "kilometer", "kilometers", "公里", "千米"),
    ("m2", "m²", "square metres", "square meters", "平方米"),
    ("km2", "km²", "square kilometres", "square kilometers", "平方公里", "平方千米"),
    ("m3", "m³", "cubic metres", "cubic meters", "立方米"),
    ("mile", "miles", "英里"),
    ("ha", "hectare", "hectares", "公顷"),
    ("acre", "acres", "英亩"),
    ("亩",),
    ("ft", "feet", "foot", "英尺"),
    ("yd", "yds", "yard", "yards"),
    ("nautical mile", "nautical miles", "nmi", "海里"),
    ("ft2", "ft²", "sq ft", "square feet", "square foot", "平方英尺"),
    ("cm2", "cm²", "square centimetres", "square centimeters", "平方厘米"),
    ("mm2", "mm²", "square millimetres", "square millimeters", "平方毫米"),
    ("cm3", "cm³", "cc", "cubic centimetres", "cubic centimeters", "立方厘米"),
    ("gal", "gallon", "gallons", "加仑"),
    ("quart", "quarts", "夸脱"),
    ("pint", "pints", "品脱"),
    ("fl oz", "fluid ounce", "fluid ounces"),
    ("hl", "hectolitre", "hectolitres", "hectoliter", "hectoliters", "百升"),
    # Chinese market units (市制): 斤 is half a kilogram, 尺 a third of a metre
    ("斤", "市斤"),
    ("尺", "市尺"),
    ("寸", "市寸"),
    ("丈",),
    ("carat", "carats", "克拉"),
    ("lux", "lx", "勒克斯"),
    ("lumen", "lumens", "lm", "流明"),
    ("ppm",),
    ("bpm",),
    ("dpi",),
    ("fps", "frames per second"),
    ("mbps", "mbit/s"),
    ("gbps", "gbit/s"),
    ("knot", "knots"),
    ("inch", "inches", "英寸"),
    ("mph", "miles per hour"),
    ("m/s", "metres per second", "meters per second", "米/秒", "米每秒"),
    (
        "km/h",
        "kph",
        "kilometres per hour",
        "kilometers per hour",
        "公里/小时",
        "千米/小时",
        "公里每小时",
    ),
    ("kg", "kilogram", "kilograms", "kilo", "kilos", "公斤", "千克"),
    ("g", "gram", "grams", "克"),
    ("mg", "milligram", "milligrams", "毫克"),
    ("lb", "lbs", "pound", "pounds", "磅"),
    ("oz", "ounce", "ounces", "盎司"),
    ("t", "tonne", "tonnes", "ton", "tons", "吨"),
    ("l", "litre", "litres", "liter", "liters", "升"),
    ("ml", "millilitre", "millilitres", "milliliter", "milliliters", "毫升"),
    ("db", "decibel", "decibels", "分贝"),
    ("tb",),
    ("gb",),
    ("mb",),
    ("kb",),
    ("元", "人民币", "yuan", "rmb"),
    ("美元", "dollar", "dollars", "usd"),
    ("欧元", "euro", "euros", "eur"),
    ("英镑", "gbp", "sterling"),
    ("日元", "yen", "jpy"),
    ("港元", "港币", "hkd"),
    ("澳元", "aud"),
    ("加元", "cad"),
    ("瑞士法郎", "chf"),
    ("卢布", "rouble", "roubles", "ruble", "rubles"),
    ("次", "times"),
    # English count nouns are no units: "75,024 people" states 75024, as "75,024 spectators" does
    ("人", "名", "位"),
    ("岁", "周岁", "years old"),
    ("倍", "fold"),
    ("分", "points"),
    ("级",),
    ("个",),
    ("座",),
    ("种",),
    ("届",),
    ("部",),
    ("页",),
    ("件",),
    ("台",),
    ("辆",),
    ("家",),
    ("所",),
    ("张",),
    ("本",),
    ("卷",),
    ("册",),
    ("篇",),
    ("首",),
    ("场",),
    ("局",),
    ("轮",),
    ("集",),
    ("期",),
    ("项",),
    ("层",),
    ("栋",),
    ("艘",),
    ("架",),
    ("枚",),
    ("颗",),
    ("条",),
    ("章",),
    ("节",),
    ("块",),
    ("支",),
    ("队",),
    ("户",),
    ("字",),
    ("代",),
    ("只",),
    ("头",),
    ("匹",),
    ("份",),
    ("套",),
    ("根",),
    ("道",),
    ("圈",),
    # the counted part of Chinese ids: 双洞四车道, 西格二线, 地铁2号线, 第二台阶
    ("车道",),
    ("号线",),
    ("线",),
    ("台阶",),
)
# Chinese measure words of counted things: 个, the general one, stands for any of them
# ("90个座位" == "90座"); two specific ones differ ("3座" != "3条")
CLASSIFIERS = frozenset(
    (
        "个",
        "人",
        *"座种届部页件台辆家所张本卷册篇首场局轮集期项层栋艘架枚颗条章节块支队户字代只头匹份套根道圈",
    )
)
# Words that scale the number before them ("1.4万" == 14000); a unit may follow ("3万人"). Not 千:
# it starts units (千瓦, 千克, 千米).
MAGNITUDES: dict[str, float] = {
    "万": 1e4,
    "亿": 1e8,
    "万亿": 1e12,
    "百万": 1e6,
    "千万": 1e7,
    "thousand": 1e3,
    "million": 1e6,
    "billion": 1e9,
    "trillion": 1e12,
    "bn": 1e9,
}

_GROUP_OF = {u: g[0] for g in UNIT_GROUPS for u in g}


def _alternation(words: object) -> str:
    spellings = sorted(words, key=len, reverse=True)  # type: ignore[call-overload]
    return "|".join(re.escape(u).replace("°", "°\\s?").replace(r"\ ", r"\s") for u in spellings)


_UNIT = _alternation(_GROUP_OF)
_MAGNITUDE = _alternation(MAGNITUDES)

# a unit or magnitude spelt with letters must end there ("8 m" but not the "m" of "8 mph")
_END = r"(?<![a-z])|(?![a-z])"
_NUMBER = re.compile(
    rf"(?<![0-9a-z.])(?<![a-z]-)(\d+(?:\.\d+)?)(?![0-9]|\.\d)"
    rf"(?:(?:st|nd|rd|th)(?![a-z]))?"
    rf"(?:\s?({_MAGNITUDE})(?:{_END}))?"
    rf"(?:(?:\s|-(?=[a-z]))?({_UNIT})(?:{_END}))?"
    rf"(?:(?<=[0-9a-z])(?![0-9a-z])|(?<![0-9a-z]))"
)
# spelt-out small numbers count only before a unit of measurement ("two minutes", "三小时"): alone
# ("one of", "一个") they are too often not a quantity; calendar units are left out ("one day")
_WORDS_EN = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()
SPELLED: dict[str, int] = {w: i for i, w in enumerate(_WORDS_EN)} | {
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "hundred": 100,
}
_MEASURES = _alternation(
    u
    for g in UNIT_GROUPS
    if g[0].isascii() and g[0] not in ("d", "week", "month", "year", "times")
    for u in g
)
# (Chinese numerals are written in digits by normalise_facts_text)
_SPELLED = re.compile(
    rf"(?<![a-z-])({'|'.join(_WORDS_EN[1:] + ['thirty', 'forty', 'fifty', 'hundred'])})"
    rf"[\s-]({_MEASURES})(?:{_END})"  # a separator: "ones" is no "one s"
)
# a unit standing alone after "per" / 每 states the unit of a rate ("200 million positions per
# second", "每小时"): a fact of its own, found when the context uses that unit anywhere
_RATE_GROUPS = frozenset(g[0] for g in UNIT_GROUPS if g[0].isascii() and g[0] not in ("%", "times"))
_RATE_SPELLINGS = {u: g for u, g in _GROUP_OF.items() if g in _RATE_GROUPS} | {"月": "month"}
_PER = re.compile(rf"(?:(?<![a-z])per\s|每\s?)({_alternation(_RATE_SPELLINGS)})(?:{_END})")

# a count of occurrences may be stated with a noun instead of its unit: "11 wins" states "11
# times" (a bare 11 in the context supports it; "11%" or "11 km" do not)
_IMPLICIT_UNITS = frozenset(("次",))


# spellings that name two units: "nm" is a nanometre (chips, light) or a newton metre (torque)
_AMBIGUOUS_UNITS: dict[str, frozenset[str]] = {"nm": frozenset(("nanometre", "n·m"))}


def same_unit(answer: str, context: str | None) -> bool:
    """Whether a value stated with unit group ``answer`` is stated by one with ``context``
    (equal, an ambiguous spelling of either, or 个 against a measure word)."""
    if answer == context:
        return True
    if context is not None and (
        context in _AMBIGUOUS_UNITS.get(answer, ()) or answer in _AMBIGUOUS_UNITS.get(context, ())
    ):
        return True
    return (
        context is not None
        and "个" in (answer, context)
        and answer in CLASSIFIERS
        and context in CLASSIFIERS
    )


def _key(value: float) -> float:
    return round(value, 6)


def _number_value(m: re.Match[str]) -> tuple[float, str | None]:
    value = float(m.group(1)) * (MAGNITUDES[re.sub(r"\s", "", m.group(2))] if m.group(2) else 1)
    unit = _GROUP_OF[re.sub(r"\s+", " ", m.group(3)).replace("° ", "°")] if m.group(3) else None
    return _key(value), unit


def _spelled_value(m: re.Match[str]) -> tuple[float, str | None]:
    return float(SPELLED[m.group(1)]), _GROUP_OF[re.sub(r"\s+", " ", m.group(2))]


def _unit_pattern(group: str) -> str:
    """Any spelling of a unit group in a context: a word ("second"), CJK as it is ("秒"), a
    one-letter one after "/" or "per" ("/s")."""
    alts = []
    for u in sorted((u for u, g in _RATE_SPELLINGS.items() if g == group), key=len, reverse=True):
        esc = re.escape(u).replace(r"\ ", r"\s")
        if not u.isascii():
            alts.append(esc)
        elif len(u) >= 2:
            alts.append(rf"(?<![a-z]){esc}(?![a-z])")
        else:
            alts.append(rf"(?:/|(?<![a-z])per\s){esc}(?![a-z])")
    if group == "d":  # 日 not after a number (a date's day): 日耗电量, 日均, 每日
        alts.append(r"(?<![0-9\s月])日(?![本期])")
    return "|".join(alts)
