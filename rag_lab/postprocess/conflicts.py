"""Conflict detection: the top chunks of a query, from different documents (or versions of one),
state different values for the same entity. The ranking is left as it is; the query is flagged.

What counts (each rule is one function below):

- **statement**: a table row (a line starting with ``|``), or a sentence of prose (ended by
  。！？；; or ". ", or a line break).
- **value**: a number with a unit (``rag_lab.text.facts``: "3000 h" == "3000小时" == "3,000
  hours", "8 MPa" == "8兆帕"), grouped by unit group; in a table row also a cell that is a code
  alone (a part number: ``HX-RF10``), group ``code``. Bare numbers and dates are not values (list
  numbers, release dates).
- **label**: the statement with its values blanked, case-folded, punctuation, markup and spaces
  removed ("含义：油温达到 65 °C 并持续 10 秒" → ``含义油温达到并持续秒``... with the unit too,
  since it is part of the value). A label needs ``min_label_tokens`` pre-tokens (CJK characters,
  words): "出厂值" alone names nothing.
- **same entity**: two statements of chunks that share a scope (an ``entity_tags`` value of the
  metadata contract, else a code the chunk text names; both naming fault codes: one of them) and
  whose labels are equal, or whose leading clauses (up to the first ，,（(:：) are equal and long
  enough. "更换回油滤芯" at 500 h in v1 and 750 h in v2 of the HX-200 manual is one entity;
  E102 on the HX-200 and E102 on the CH-30 are not (no shared model tag).
- **conflict**: for a unit group both statements have values in, the sets differ (65 °C vs
  70 °C); equal sets in every shared group (3000 h vs 3000小时) are agreement.

Only chunks from different documents are compared (one document repeating itself is not two
sources disagreeing). ``annotations[qid]["conflict"]`` lists the pairs (``Annotating``);
``conflict_notes`` renders them for the structured context.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rag_lab.ranking import ranked
from rag_lab.text import STOPWORDS
from rag_lab.text.facts import extract_facts, normalise_facts_text
from rag_lab.text.patterns import TOKEN
from rag_lab.types import Chunk, Run
from rag_lab.validate import OptionError, boolean, integer

KEY = "conflict"  # the annotation (and per-query column) this stage writes
_SENTENCE = re.compile(r"(?<=[。！？；;!?])|(?<=\.)\s+|\n+")
_CLAUSE = re.compile(r"[，,（(:：]")
_NOT_LABEL = re.compile(r"[\W_]+")
_CELL_CODE = re.compile(r"[a-z][a-z0-9]*(?:[-.][a-z0-9]+)+|[a-z]+\d+[a-z0-9]*")


@dataclass(frozen=True)
class Statement:
    """One statement of a chunk: its label (normalised, values blanked), leading clause, its
    name (the readable label: the normalised text with the values blanked), the text it was read
    from and its values (unit group → value spellings, by value)."""

    label: str
    lead: str
    name: str
    text: str
    values: Mapping[str, Mapping[float | str, str]]


def _label(text: str) -> str:
    return _NOT_LABEL.sub("", text)


def _n_tokens(label: str) -> int:
    return sum(1 for _ in TOKEN.finditer(label))


@lru_cache(maxsize=4096)
def statements(text: str, min_label_tokens: int = 4) -> tuple[Statement, ...]:
    """The statements of a chunk text that carry at least one value and a long enough label."""
    out: list[Statement] = []
    for line in text.splitlines():
        parts = [line] if line.lstrip().startswith("|") else _SENTENCE.split(line)
        for part in parts:
            st = _statement(part, min_label_tokens)
            if st is not None:
                out.append(st)
    return tuple(out)


def _statement(raw: str, min_label_tokens: int) -> Statement | None:
    if not raw or not raw.strip():
        return None
    norm = normalise_facts_text(raw, context=False)
    values: dict[str, dict[float | str, str]] = {}
    rest = norm
    for fact in extract_facts(raw):
        if fact.kind != "number" or fact.number is None:
            continue
        value, unit = fact.number
        if unit is None:  # a bare number: a list item, a count, a year
            continue
        values.setdefault(unit, {})[value] = fact.text
        rest = rest.replace(fact.text, " ")
    if norm.lstrip().startswith("|"):
        cells = [c.strip() for c in rest.strip().strip("|").split("|")]
        kept = []
        for cell in cells:
            if _CELL_CODE.fullmatch(cell) and re.search(r"\d", cell):
                values.setdefault("code", {})[cell] = cell
            elif not re.fullmatch(r"[-:\s]*", cell):
                kept.append(cell)
        rest = " | ".join(kept)
    if not values:
        return None
    label = _label(rest)
    if _n_tokens(label) < min_label_tokens:
        return None
    lead = _label(_CLAUSE.split(rest.strip(" |*#-"), maxsplit=1)[0])
    lead = lead if _n_tokens(lead) >= min_label_tokens else ""
    name = re.sub(r"\s+", " ", rest).strip(" |*#-")
    return Statement(label, lead, name, raw.strip(), values)


def same_entity(a: Statement, b: Statement) -> bool:
    """Equal labels, or equal (long enough) leading clauses."""
    return a.label == b.label or (bool(a.lead) and a.lead == b.lead)


def disagreement(a: Statement, b: Statement) -> tuple[str, str] | None:
    """The two values of the first unit group both state differently, or None (agreement)."""
    for group in sorted(set(a.values) & set(b.values)):
        va, vb = a.values[group], b.values[group]
        if set(va) != set(vb):
            return ", ".join(va.values()), ", ".join(vb.values())
    return None


class ConflictDetector:
    """Args:
    top_n: how many of a query's best chunks are compared (pairs from different documents).
    min_label_tokens: pre-tokens a statement's label needs to name an entity.
    scope_pattern: what a code looks like in a chunk's title, section path and text when it has
        no ``entity_tags`` (the contract's): two chunks are compared only when they share one.
    fault_code_pattern: fault codes among the scope: two chunks that both name fault codes must
        share one (the E102 section of one manual against the E105 section of another is no
        conflict, whatever they share).
    query_overlap: keep only the pairs whose entity the query asks about: one of the two
        statements shares a term with the query (an ASCII word of 3+ letters, or a pair of
        adjacent CJK characters), codes of the shared scope (HX-200) not counting. Off: every
        conflict among the top chunks is flagged, also one the query did not ask about.
    """

    def __init__(
        self,
        top_n: int = 5,
        min_label_tokens: int = 4,
        scope_pattern: str = r"\b[A-Z][A-Z0-9]*(?:[-.][A-Z0-9]+)*\d[A-Z0-9]*\b",
        fault_code_pattern: str = r"(?:[A-Z]{1,2}\d{3,4}|AL\.\d{3})",
        query_overlap: bool = True,
    ) -> None:
        self.top_n = integer(top_n, "top_n", ge=2)
        self.min_label_tokens = integer(min_label_tokens, "min_label_tokens", ge=1)
        self.scope_pattern = _regex(scope_pattern, "scope_pattern")
        self.fault_code_pattern = _regex(fault_code_pattern, "fault_code_pattern")
        self.query_overlap = boolean(query_overlap, "query_overlap")
        self.stats: dict[str, float] = {}
        self.annotation_names = (KEY,)
        self.annotations: dict[str, dict[str, Any]] = {}

    def scope(self, chunk: Chunk) -> frozenset[str]:
        tags = chunk.metadata.get("entity_tags")
        if isinstance(tags, (list, tuple)) and tags:
            return frozenset(str(t) for t in tags)
        # no contract tags: the codes its title, section path and text name (HX-200, E102)
        return frozenset(
            self.scope_pattern.findall(f"{chunk.title}\n{chunk.section}\n{chunk.text}")
        )

    def comparable(self, a: Chunk, b: Chunk) -> bool:
        """Different documents about the same thing (a shared scope; shared fault code when both
        name one)."""
        if a.doc_id == b.doc_id:
            return False
        sa, sb = self.scope(a), self.scope(b)
        if not sa & sb:
            return False
        fa = {t for t in sa if self.fault_code_pattern.fullmatch(t)}
        fb = {t for t in sb if self.fault_code_pattern.fullmatch(t)}
        return not (fa and fb) or bool(fa & fb)

    def pairs(self, top: Sequence[Chunk]) -> list[dict[str, Any]]:
        """Every conflicting statement pair among ``top`` (best first), one per entity and chunk
        pair: ``{chunks: [a, b], docs: [..], entity: label text, values: [va, vb]}``."""
        found: list[dict[str, Any]] = []
        for i, a in enumerate(top):
            for b in top[i + 1 :]:
                if not self.comparable(a, b):
                    continue
                seen: set[str] = set()
                for sa in statements(a.text, self.min_label_tokens):
                    for sb in statements(b.text, self.min_label_tokens):
                        if sa.label in seen or not same_entity(sa, sb):
                            continue
                        values = disagreement(sa, sb)
                        if values is None:
                            continue
                        seen.add(sa.label)
                        found.append(
                            {
                                "chunks": [a.chunk_id, b.chunk_id],
                                "docs": [a.doc_id, b.doc_id],
                                "versions": [a.metadata.get("version"), b.metadata.get("version")],
                                "entity": sa.name,
                                "statements": [sa.text, sb.text],
                                "values": list(values),
                            }
                        )
        return found

    def process(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run:
        t0 = time.perf_counter()
        self.annotations = {}
        n_pairs = 0
        for qid, scores in run.items():
            top = [chunks[c] for c in ranked(scores)[: self.top_n]]
            found = self.pairs(top)
            if self.query_overlap:
                asked = _terms(queries.get(qid, ""))
                found = [p for p in found if asked & _terms(" ".join(p["statements"]))]
            if found:
                self.annotations[qid] = {KEY: found}
                n_pairs += len(found)
        n = max(len(run), 1)
        self.stats = {
            "flagged_share": len(self.annotations) / n,
            "pairs_per_query": n_pairs / n,
            "ms_per_query": 1000 * (time.perf_counter() - t0) / n,
        }
        return {qid: dict(scores) for qid, scores in run.items()}


_NOTE = {
    "en": "Sources disagree on {entity}: {a} ({da}) vs {b} ({db}); check which edition applies.",
    "zh": "来源不一致：{entity}，{da} 为 {a}，{db} 为 {b}；请确认适用的版本。",
}


def conflict_notes(annotation: Mapping[str, Any] | None, language: str) -> list[str]:
    """One line per conflicting pair of a query's annotation (``annotations[qid]``), for the
    structured context's notes; ``[]`` without conflicts. ``language``: ``"en"`` | ``"zh"``."""
    if language not in _NOTE:
        raise ValueError(f"language must be one of {sorted(_NOTE)}, got {language!r}")
    notes = []
    for pair in (annotation or {}).get(KEY, []):
        da, db = (
            f"{d} v{v}" if v else str(d)
            for d, v in zip(pair["docs"], pair.get("versions") or [None, None])
        )
        a, b = pair["values"]
        notes.append(_NOTE[language].format(entity=pair["entity"], a=a, b=b, da=da, db=db))
    return notes


def notes_by_query(
    annotations: Mapping[str, Mapping[str, Any]], queries: Mapping[str, str]
) -> dict[str, list[str]]:
    """``conflict_notes`` of every annotated query, in the language of its text: what the answer
    stage's ``notes`` take (``rag_lab.pipeline.answers.answer_queries``)."""
    from rag_lab.text.language import detect_language

    out = {}
    for qid, ann in annotations.items():
        notes = conflict_notes(ann, detect_language(queries.get(qid, "")))
        if notes:
            out[qid] = notes
    return out


_TERM = re.compile(r"(?<![a-z0-9.-])[a-z]{3,}(?![a-z0-9.-])|[\u4e00-\u9fff]{2,}")


def _terms(text: str) -> set[str]:
    """ASCII words of 3+ letters and adjacent CJK character pairs of a text (codes dropped)."""
    out: set[str] = set()
    for m in _TERM.finditer(normalise_facts_text(text, context=False)):
        w = m.group(0)
        if not w.isascii():
            out |= {w[i : i + 2] for i in range(len(w) - 1)}
        elif w not in STOPWORDS:
            out.add(w)
    return out


def _regex(pattern: str, key: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise OptionError(key, pattern, f"not a regex ({exc})") from None
