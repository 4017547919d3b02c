"""Rule-based follow-up resolution: a follow-up turn that points back ("它对应哪个手册章节？",
"How long is the warm-up for it?") gets the entities of the conversation's earlier turns — fault
codes, model numbers, named components — written in front of it.

Only the user's earlier *texts* are read (``metadata.history``, handed over by the pipeline:
``rag_lab.protocols.QueryMetadataAware``): each turn is retrieved on its own, and the rewritten
text is all that differs from retrieving it without history.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.errors import ConfigError

# ASCII look-arounds instead of \b: in Python's Unicode regexes a CJK character is a word
# character, so "E102是什么" has no \b after the code
ENTITY_PATTERNS: dict[str, str] = {
    "model": r"(?<![A-Za-z0-9.\-])(?:[A-Z]{2,3}\d{0,2}-[A-Z]{0,3}\d{2,4}[A-Z]?|[A-Z]{2,3}\d)"
    r"(?![A-Za-z0-9\-])",  # HX-200, SV7-04A, PM-DI16, SV7
    "fault_code": r"(?<![A-Za-z0-9.\-])(?:[A-Z]{1,2}\d{2,4}|AL\.\d{3}|0x[0-9A-Fa-f]{4})"
    r"(?![A-Za-z0-9])",  # E102, SV0432, E12, AL.912, 0x1020
}
COMPONENTS = (
    "液压站", "冷水机", "空压机", "润滑泵", "电主轴", "伺服驱动器", "编码器", "轴承", "冷凝器",
    "蒸发器", "油分离器", "蓄能器", "滤芯", "电池", "再生电阻", "制动电阻", "主轴", "电机",
    "encoder", "bearing", "spindle", "condenser", "evaporator", "oil separator", "filter",
    "battery", "accumulator", "regenerative resistor", "compressor", "chiller", "servo drive",
    "motor",
)  # fmt: skip
PRONOUNS_ZH = ("它", "其", "该", "此", "这", "那", "上述", "前面")
PRONOUNS_EN = (
    "it", "its", "this", "that", "these", "those", "they", "them", "their", "there", "same",
    "the alarm", "the fault", "the error", "the code", "the unit", "the machine",
)  # fmt: skip


class RuleHistoryRewrite:
    """Args:
        entity_patterns: kind → regular expression (default ``ENTITY_PATTERNS``: ``model``,
            ``fault_code``); ``components``: named parts matched as words (case-insensitive).
        sticky: kinds carried whenever the follow-up has none of that kind (default ``[model]``:
            "那 E22 呢" after "LU-10 E21 压力未建立" keeps LU-10 and drops E21); other kinds are
            carried only when the follow-up has a pronoun or no entity at all.
        pronouns: words that point back (default Chinese + English lists).

    Each kind comes from the latest earlier turn that has one. The rewrite is
    ``"<carried entities> <follow-up>"``; a query without history, or with nothing to carry, is
    unchanged.
    """

    query_metadata_fields = ("history",)

    def __init__(
        self,
        entity_patterns: Mapping[str, str] | None = None,
        components: Sequence[str] | None = None,
        sticky: Sequence[str] = ("model",),
        pronouns: Sequence[str] | None = None,
    ) -> None:
        pats = dict(ENTITY_PATTERNS if entity_patterns is None else entity_patterns)
        terms = list(COMPONENTS if components is None else components)
        self.patterns: dict[str, re.Pattern[str]] = {}
        for kind, pat in pats.items():
            try:
                self.patterns[kind] = re.compile(pat)
            except re.error as exc:
                raise ConfigError(
                    f"query_transforms.history.entity_patterns.{kind}: bad regular expression "
                    f"({exc})"
                ) from None
        if terms:
            alts = "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True))
            self.patterns["component"] = re.compile(
                rf"(?<![A-Za-z])(?:{alts})(?![A-Za-z])", re.IGNORECASE
            )
        unknown = sorted(set(sticky) - set(self.patterns))
        if unknown:
            raise ConfigError(
                f"query_transforms.history.sticky names {', '.join(unknown)}, not an entity kind "
                f"({', '.join(self.patterns)})"
            )
        self.sticky = tuple(sticky)
        self._history: dict[str, list[str]] = {}
        zh = [p for p in (PRONOUNS_ZH if pronouns is None else pronouns) if not p.isascii()]
        en = [p for p in (PRONOUNS_EN if pronouns is None else pronouns) if p.isascii()]
        self._zh = tuple(zh)
        self._en = (
            re.compile(rf"\b(?:{'|'.join(re.escape(p) for p in en)})\b", re.IGNORECASE)
            if en
            else None
        )

    def entities(self, text: str) -> dict[str, list[str]]:
        """Kind → distinct matches in order of appearance (after NFKC: full-width codes count)."""
        text = unicodedata.normalize("NFKC", text)
        out: dict[str, list[str]] = {}
        for kind, pat in self.patterns.items():
            found = list(dict.fromkeys(m.group(0) for m in pat.finditer(text)))
            if found:
                out[kind] = found
        return out

    def points_back(self, text: str) -> bool:
        return any(p in text for p in self._zh) or bool(self._en and self._en.search(text))

    def rewrite(self, text: str, history: Sequence[str]) -> str:
        if not history:
            return text
        own = self.entities(text)
        open_ = not own or self.points_back(text)
        carried: list[str] = []
        for kind in self.patterns:
            if kind in own or not (open_ or kind in self.sticky):
                continue
            for turn in reversed(history):
                found = self.entities(turn).get(kind)
                if found:
                    carried += [e for e in found if e.casefold() not in text.casefold()]
                    break
        return f"{' '.join(carried)} {text}" if carried else text

    def set_query_metadata(self, metadata: Mapping[str, Mapping[str, Any]]) -> None:
        """``QueryMetadataAware``: each query's ``history`` (previous user turns, oldest first)."""
        self._history = {q: [str(t) for t in m.get("history") or ()] for q, m in metadata.items()}

    def transform(self, queries: Mapping[str, str]) -> dict[str, str]:
        history = self._history
        return {qid: self.rewrite(text, history.get(qid, ())) for qid, text in queries.items()}
