"""Synthetic (context, claim, label) pairs for training a faithfulness classifier from a corpus
(``rag-lab train judge``), in the way MiniCheck trained its checkers on synthetic claims.

For each chunk, up to ``per_chunk`` of its sentences (5 words / 8 Chinese characters or more) are
claim sources, and each gives one *supported* and one *unsupported* claim, the chunk being the
context:

- supported (label 1): the sentence itself, or a light rewrite of it — its two clauses swapped
  (``reorder``), a number written another way (``number_form``: 3,000 ~ 3000, 5% ~ 5 percent,
  3小时 ~ 三小时), a word replaced by a synonym from the project's synonym dictionary
  (``synonym``);
- unsupported (label 0), one of: a value changed to another value of the same unit the document
  states for something else, or a nearby one (``value``); a unit changed to another one
  (``unit``); a date moved (``date``); a name replaced by a name of another document
  (``entity``); a negation added or removed (``negation``); an action verb replaced by one of
  another kind (``action``: replace → clean, 更换 → 检查); or the sentence of *another* document
  that shares the most words with this one (``other_document``).

Pairs are held out by document (``split_by_document``): no dev document's chunks are trained on.
Deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rag_lab.text import ContentTerms, has_cjk, split_sentences
from rag_lab.text.actions import EN_VERBS, SYNONYMS, ZH_VERBS
from rag_lab.types import Chunk

SUPPORTED_KINDS = ("sentence", "reorder", "number_form", "synonym")
UNSUPPORTED_KINDS = ("value", "unit", "date", "entity", "negation", "action", "other_document")

_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\d.]*\d)")
_YEAR = re.compile(r"(?<!\d)(1[89]\d\d|20\d\d)(?!\d)")
# unit spellings swapped for a unit of another kind (``unit`` claims)
_UNIT_SWAPS = {
    "mm": "cm", "cm": "mm", "km": "m", "kg": "g", "mg": "g", "g": "kg", "ml": "l", "hours": "days",
    "days": "weeks", "minutes": "hours", "seconds": "minutes", "%": " mg", "bar": "psi",
    "小时": "分钟", "分钟": "小时", "秒": "分钟", "公里": "米", "米": "厘米", "厘米": "毫米",
    "公斤": "克", "克": "公斤", "天": "周", "年": "个月", "万": "千",
}  # fmt: skip
_UNIT_RE = re.compile(
    r"(?<=\d)(\s?)(" + "|".join(sorted(map(re.escape, _UNIT_SWAPS), key=len, reverse=True)) + r")"
    r"(?![a-z])"
)
_NEGATE_EN = re.compile(r"\b(is|are|was|were|can|will|should|does|do|did|has|have|may|must)\b")
_NEGATE_ZH = (("不是", "是"), ("不能", "能"), ("不会", "会"), ("没有", "有"), ("不", ""))
_ZH_DIGITS = dict(zip("0123456789", "零一二三四五六七八九"))


@dataclass(frozen=True)
class ClaimPair:
    """A context, a claim about it, its label (1 = supported) and how it was made."""

    context: str
    claim: str
    label: int
    kind: str
    doc_id: str


def _claim_sentences(text: str) -> list[str]:
    out = []
    for s in split_sentences(text):
        long_enough = len(s) >= 8 if has_cjk(s) else len(s.split()) >= 5
        if long_enough and not s.startswith(("#", "|", "-")):
            out.append(s)
    return out


def _reorder(s: str, rng: random.Random) -> str | None:
    sep = "，" if has_cjk(s) else ", "
    parts = s.rstrip("。.!?！？").split(sep)
    if len(parts) != 2 or min(len(p) for p in parts) < 6:
        return None
    end = s[len(s.rstrip("。.!?！？")) :] or ("。" if has_cjk(s) else ".")
    a, b = parts
    if not has_cjk(s):
        a, b = a[:1].lower() + a[1:], b[:1].upper() + b[1:]
    return f"{b}{sep}{a}{end}"


def _number_form(s: str, rng: random.Random) -> str | None:
    m = re.search(r"\d{1,3}(?:,\d{3})+", s)
    if m:
        return s[: m.start()] + m.group(0).replace(",", "") + s[m.end() :]
    m = re.search(r"(?<![\d,])(\d)(\d{3})(?![\d,.])", s)
    if m and not _YEAR.fullmatch(m.group(0)):
        return s[: m.start()] + f"{m.group(1)},{m.group(2)}" + s[m.end() :]
    if "%" in s and not has_cjk(s):
        return s.replace("%", " percent", 1)
    m = re.search(r"(?<!\d)([1-9])(?=(?:小时|分钟|天|个|次|年))", s)
    if m:
        return s[: m.start()] + _ZH_DIGITS[m.group(1)] + s[m.end() :]
    return None


def _synonym(s: str, synonyms: Mapping[str, Sequence[str]], rng: random.Random) -> str | None:
    for term, alts in synonyms.items():
        if alts and re.search(rf"(?<!\w){re.escape(term)}(?!\w)", s, re.I):
            alt = rng.choice(list(alts))
            return re.sub(rf"(?<!\w){re.escape(term)}(?!\w)", alt, s, count=1, flags=re.I)
    return None


def _value(s: str, doc_numbers: Sequence[str], rng: random.Random) -> str | None:
    found = [m for m in _NUMBER.finditer(s) if not _YEAR.fullmatch(m.group(0))]
    if not found:
        return None
    m = rng.choice(found)
    old = m.group(0)
    others = [n for n in doc_numbers if n != old]
    if others and rng.random() < 0.5:
        new = rng.choice(others)  # a value the document states for something else
    else:
        digits = old.replace(",", "")
        value = float(digits)
        if "." in digits:
            new = f"{value * rng.choice((0.5, 1.5, 2.0, 0.8)):.{len(digits.split('.')[1])}f}"
        else:
            new = str(int(value) + rng.choice((1, 2, 3, 5, 10)) * (1 if value < 10 else 7))
    if new == old:
        return None
    return s[: m.start()] + new + s[m.end() :]


def _unit(s: str, rng: random.Random) -> str | None:
    m = _UNIT_RE.search(s)
    if m is None:
        return None
    new = _UNIT_SWAPS[m.group(2)]
    return s[: m.start(2)] + new + s[m.end(2) :]


def _date(s: str, rng: random.Random) -> str | None:
    m = _YEAR.search(s)
    if m is None:
        return None
    year = int(m.group(0)) + rng.choice((-3, -2, -1, 1, 2, 3))
    return s[: m.start()] + str(year) + s[m.end() :]


def _names_of(s: str) -> list[str]:
    """The names of a sentence (``rag_lab.text.facts``) as the sentence writes them."""
    from rag_lab.text.facts import extract_facts

    out = []
    for f in extract_facts(s, names=True):
        if f.kind != "name":
            continue
        m = re.search(re.escape(f.text), s, flags=re.I)
        if m is not None:
            out.append(m.group(0))
    return out


def _entity(s: str, names: Sequence[str], rng: random.Random) -> str | None:
    own = _names_of(s)
    pool = [n for n in names if n not in own and has_cjk(n) == has_cjk(s)]
    if not own or not pool:
        return None
    old, new = rng.choice(own), rng.choice(pool)
    return re.sub(rf"(?<!\w){re.escape(old)}(?!\w)", new, s, count=1)


def _negation(s: str, rng: random.Random) -> str | None:
    if has_cjk(s):
        for neg, pos in _NEGATE_ZH:
            if neg in s:
                return s.replace(neg, pos, 1) if pos else s.replace(neg, "", 1)
        for neg, pos in _NEGATE_ZH[:-1]:
            if pos in s:
                return s.replace(pos, neg, 1)
        return None
    if re.search(r"\bnot\b", s):
        return re.sub(r"\s?\bnot\b", "", s, count=1)
    m = _NEGATE_EN.search(s)
    return None if m is None else s[: m.end()] + " not" + s[m.end() :]


def _action(s: str, rng: random.Random) -> str | None:
    if has_cjk(s):
        verbs = [v for v in ZH_VERBS if len(v) >= 2 and v in s]
    else:
        verbs = [w for w in re.findall(r"[A-Za-z]+", s) if w.lower() in EN_VERBS and len(w) >= 4]
    if not verbs:
        return None
    old = rng.choice(sorted(verbs))
    group = next((g for g in SYNONYMS if old.lower() in g), frozenset())
    pool = [
        v
        for g in SYNONYMS
        if not (g & group)
        for v in g
        if has_cjk(v) == has_cjk(old) and len(v) >= 2
    ]
    if not pool:
        return None
    new = rng.choice(sorted(pool))
    if old[:1].isupper():
        new = new[:1].upper() + new[1:]
    return s.replace(old, new, 1)


class _Neighbours:
    """The sentence of another document sharing the most content words with a sentence."""

    def __init__(self, sentences: Sequence[tuple[str, str]], terms: ContentTerms) -> None:
        self.sentences = list(sentences)
        self.terms = [set(terms(s)) for _, s in self.sentences]
        self.index: dict[str, list[int]] = {}
        for i, ts in enumerate(self.terms):
            for t in ts:
                self.index.setdefault(t, []).append(i)
        self.analyse = terms

    def other(self, doc_id: str, sentence: str) -> str | None:
        counts: Counter[int] = Counter()
        for t in set(self.analyse(sentence)):
            postings = self.index.get(t, [])
            if len(postings) <= 200:  # common words say nothing
                counts.update(postings)
        for i, n in counts.most_common(20):
            if self.sentences[i][0] != doc_id and n >= 2:
                return self.sentences[i][1]
        return None


def synthesise(
    chunks: Sequence[Chunk],
    per_chunk: int = 3,
    seed: int = 0,
    synonyms: Mapping[str, Sequence[str]] | None = None,
    terms: ContentTerms | None = None,
) -> list[ClaimPair]:
    """The pairs of a corpus (rules: module docstring), in chunk order."""
    rng = random.Random(seed)
    terms = terms or ContentTerms()
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    numbers = {
        d: [m.group(0) for c in cs for m in _NUMBER.finditer(c.text)] for d, cs in by_doc.items()
    }
    doc_names = {
        d: {n for c in cs for s in _claim_sentences(c.text)[:4] for n in _names_of(s)}
        for d, cs in by_doc.items()
    }
    all_names = sorted(set().union(*doc_names.values())) if doc_names else []
    sources = [(c.doc_id, s) for c in chunks for s in _claim_sentences(c.text)]
    neighbours = _Neighbours(sources, terms)
    out: list[ClaimPair] = []
    for chunk in chunks:
        sentences = _claim_sentences(chunk.text)
        for s in rng.sample(sentences, min(per_chunk, len(sentences))):
            rewrites = {
                "reorder": _reorder(s, rng),
                "number_form": _number_form(s, rng),
                "synonym": _synonym(s, synonyms or {}, rng),
            }
            options = [(k, v) for k, v in rewrites.items() if v and v != s]
            kind, claim = rng.choice(options) if options and rng.random() < 0.5 else ("sentence", s)
            out.append(ClaimPair(chunk.text, claim, 1, kind, chunk.doc_id))
            other_names = [n for n in all_names if n not in doc_names[chunk.doc_id]]
            edits = {
                "value": _value(s, numbers[chunk.doc_id], rng),
                "unit": _unit(s, rng),
                "date": _date(s, rng),
                "entity": _entity(s, other_names, rng),
                "negation": _negation(s, rng),
                "action": _action(s, rng),
                "other_document": neighbours.other(chunk.doc_id, s),
            }
            wrong = [(k, v) for k, v in edits.items() if v and v != s and v not in chunk.text]
            if wrong:
                kind, claim = rng.choice(wrong)
                out.append(ClaimPair(chunk.text, claim, 0, kind, chunk.doc_id))
    return out


def split_by_document(
    pairs: Sequence[ClaimPair], dev_fraction: float, seed: int = 0
) -> tuple[list[ClaimPair], list[ClaimPair]]:
    """``(train, dev)``: the pairs of a random ``dev_fraction`` of the documents are dev."""
    docs = sorted({p.doc_id for p in pairs})
    random.Random(seed).shuffle(docs)
    dev_docs = set(docs[: round(len(docs) * dev_fraction)])
    return (
        [p for p in pairs if p.doc_id not in dev_docs],
        [p for p in pairs if p.doc_id in dev_docs],
    )
