"""Principals and readers in one canonical form.

A document's ``readers`` (contract field): a list of names; ``group:<name>`` is a group,
``user:<name>`` or a bare name a user, ``*`` everyone. A query's ``principal`` (metadata):
``{user: alice, groups: [maintenance]}``, or just the user's name. Names compare after Unicode
NFKC normalisation and case folding (``ＭＡＩＮＴＥＮＡＮＣＥ`` = ``maintenance``) and with
surrounding white space removed: two spellings that a person reads as one name are one name.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

READERS_FIELD = "readers"
PRINCIPAL_FIELD = "principal"
EVERYONE = "*"


def normalise_name(name: Any) -> str:
    """NFKC, then case folding, then NFKC again (folding can denormalise), stripped."""
    text = unicodedata.normalize("NFKC", str(name))
    return unicodedata.normalize("NFKC", text.casefold()).strip()


def _entry(value: Any) -> str | None:
    """One reader as ``user:<n>``, ``group:<n>`` or ``*``; ``None`` for an empty name."""
    text = normalise_name(value)
    if text == EVERYONE:
        return EVERYONE
    kind, sep, name = text.partition(":")
    if sep and kind.strip() in ("user", "group"):
        name = name.strip()
        return f"{kind.strip()}:{name}" if name else None
    return f"user:{text}" if text else None


def readers_of(metadata: Mapping[str, Any]) -> frozenset[str] | None:
    """A chunk's readers in canonical form; ``None`` when the field is absent, null or not a list
    of names (unknown: the policy's ``unlabelled`` rule decides). An empty list: nobody."""
    value = metadata.get(READERS_FIELD)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple, set, frozenset)):
        return None
    out = set()
    for item in value:
        if not isinstance(item, (str, int)) or isinstance(item, bool):
            return None  # a malformed list is unknown, never a partial grant
        entry = _entry(item)
        if entry is not None:
            out.add(entry)
    return frozenset(out)


@dataclass(frozen=True)
class Principal:
    """A query's reader identity: ``user`` (canonical, ``None`` when anonymous) and ``groups``."""

    user: str | None
    groups: frozenset[str]

    @property
    def tokens(self) -> frozenset[str]:
        """What a readers list is matched against: ``user:<u>``, ``group:<g>`` and ``*``."""
        out = {EVERYONE, *(f"group:{g}" for g in self.groups)}
        if self.user:
            out.add(f"user:{self.user}")
        return frozenset(out)

    def key(self) -> list[str]:
        return sorted(self.tokens)


ANONYMOUS = Principal(None, frozenset())


def principal_of(value: Any) -> Principal:
    """A query's ``principal`` metadata in canonical form (``None``: anonymous). Raises
    ``ValueError`` for a value that is neither a name nor ``{user, groups}``."""
    if value is None or value == "":
        return ANONYMOUS
    if isinstance(value, Principal):
        return value
    if isinstance(value, str):
        return Principal(normalise_name(value) or None, frozenset())
    if not isinstance(value, Mapping):
        raise ValueError(f"principal must be a user name or {{user, groups}}, got {value!r}")
    unknown = sorted(set(map(str, value)) - {"user", "groups"})
    if unknown:
        raise ValueError(f"principal: unknown key(s) {', '.join(unknown)} (known: user, groups)")
    user: Any = value.get("user")
    groups: Any = value.get("groups") or []
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, Sequence) or any(not isinstance(g, (str, int)) for g in groups):
        raise ValueError(f"principal.groups must be a list of names, got {groups!r}")
    names = {normalise_name(g) for g in groups}
    return Principal(
        normalise_name(user) or None if user is not None else None,
        frozenset(n for n in names if n),
    )
