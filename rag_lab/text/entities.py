"""Entities named in text: model numbers, fault codes, part numbers, component names.

Two sources, one canonical form:

- **patterns**: kind → regular expression (the metadata contract's ``entity_patterns``), matched
  case-insensitively; a match is its own canonical name, upper-cased (``e102`` → ``E102``);
- **a user dictionary** (YAML or JSON), canonical name → ``kind``, ``aliases`` and ``related``::

      HX-200:
        kind: model
        aliases: [HX200, 液压站, hydraulic power unit]
        related: [E102, 回油滤芯]      # other entries (or pattern names): relation-aware expansion

  An alias is matched like a dictionary term of the query transforms
  (``rag_lab.text.patterns.term_pattern``: Latin edges anchored, acronyms case-sensitive, Chinese
  as a substring); it counts as its canonical name. ``related`` is read both ways.

Names are compared by their ``key`` (case-folded, separators dropped), so ``hx200`` in a query,
``HX-200`` in a chunk's ``entity_tags`` and in the dictionary are one entity.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_lab.errors import ConfigError
from rag_lab.io.files import read_yaml_file
from rag_lab.text.patterns import term_pattern

_ENTRY_KEYS = ("kind", "aliases", "related")


_SEPARATORS = re.compile(r"[\s\-_./]+")


def key(name: str) -> str:
    """The form names are compared in: case-folded, without spaces and separators, so ``SP45``,
    ``sp-45`` and ``SP 45`` are one entity."""
    return _SEPARATORS.sub("", str(name)).casefold()


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str = ""
    aliases: tuple[str, ...] = ()
    related: tuple[str, ...] = ()


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
        raise ConfigError(
            f"{where}: expected a string or a list of non-empty strings, got {value!r}"
        )
    return tuple(v.strip() for v in values)


def read_entity_dictionary(path: Path) -> list[Entry]:
    """The entries of a YAML / JSON entity dictionary (see the module docstring); a bad file or
    key is one ``ConfigError`` line naming the file (and line or key)."""
    raw = read_yaml_file(Path(path), "entity dictionary", "YAML or JSON")
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{path}: expected a mapping of entity -> {{kind, aliases, related}}, "
            f"got {type(raw).__name__}"
        )
    out: list[Entry] = []
    seen: dict[str, str] = {}
    for name, spec in raw.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{path}: key {name!r}: an entity name must be a non-empty string")
        where = f"{path}: {name}"
        spec = {} if spec is None else spec
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{where}: expected a mapping (kind, aliases, related), got {spec!r}")
        unknown = sorted(set(map(str, spec)) - set(_ENTRY_KEYS))
        if unknown:
            raise ConfigError(
                f"{where}: unknown key(s) {', '.join(unknown)} (known: kind, aliases, related)"
            )
        kind = spec.get("kind") or ""
        if not isinstance(kind, str):
            raise ConfigError(f"{where}.kind: expected a string, got {kind!r}")
        entry = Entry(
            name.strip(),
            kind,
            _strings(spec.get("aliases"), f"{where}.aliases"),
            _strings(spec.get("related"), f"{where}.related"),
        )
        for form in (entry.name, *entry.aliases):
            other = seen.setdefault(key(form), entry.name)
            if other != entry.name:
                raise ConfigError(f"{where}: {form!r} also names entity {other!r}")
        out.append(entry)
    return out


@dataclass
class EntityRecogniser:
    """Finds entities in text by ``patterns`` and the dictionary ``entries``; ``related(name)``
    is the dictionary's relations of an entity (both ways)."""

    entries: Iterable[Entry] = ()
    patterns: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.entries = tuple(self.entries)
        self._regexes = []
        for kind, pattern in self.patterns.items():
            try:
                self._regexes.append(re.compile(pattern, re.IGNORECASE))
            except re.error as exc:
                raise ConfigError(f"patterns.{kind}: invalid regular expression ({exc})") from None
        self.canonical: dict[str, str] = {}  # key of a name or alias -> canonical name
        forms: list[tuple[str, str]] = []
        for e in self.entries:
            for form in (e.name, *e.aliases):
                self.canonical[key(form)] = e.name
                forms.append((form, e.name))
        forms.sort(key=lambda f: (-len(f[0]), f[0]))  # longest first: 液压站 before 液压
        self._forms = [(term_pattern(form), name) for form, name in forms]
        self._related: dict[str, set[str]] = {}
        for e in self.entries:
            for other in e.related:
                target = self.canonical.get(key(other), other)
                self._related.setdefault(key(e.name), set()).add(target)
                self._related.setdefault(key(target), set()).add(e.name)

    def name(self, found: str) -> str:
        """The canonical name of a matched form (a pattern match: upper-cased)."""
        return self.canonical.get(key(found), found.upper() if found.isascii() else found)

    def find(self, text: str) -> set[str]:
        """Every entity ``text`` names, canonical names."""
        out = {self.name(m.group(0)) for rx in self._regexes for m in rx.finditer(text)}
        for pattern, name in self._forms:
            if pattern.search(text):
                out.add(name)
        return out

    def related(self, name: str) -> set[str]:
        return set(self._related.get(key(name), ()))

    @property
    def digest(self) -> str:
        """What the dictionary and patterns are (the retriever's identity, so a changed file
        re-keys cached indexes and runs)."""
        text = repr(
            (
                sorted((e.name, e.kind, e.aliases, e.related) for e in self.entries),
                sorted(self.patterns.items()),
            )
        )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


__all__ = ["Entry", "EntityRecogniser", "key", "read_entity_dictionary"]
