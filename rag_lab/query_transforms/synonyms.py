"""Abbreviation / synonym expansion from a YAML dictionary written by the team that owns the
corpus (``rag_lab/sample/maintenance_kb/synonyms.yaml`` for the sample)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag_lab.errors import ConfigError
from rag_lab.io.files import read_yaml_file
from rag_lab.query_transforms._expansion import Expander, expand_all, symmetric
from rag_lab.validate import boolean, integer


def read_dictionary(path: Path) -> dict[str, list[str]]:
    """``{term: [equivalents]}`` from a YAML mapping whose values are a string or a list of
    strings. Anything else is a ``ConfigError`` naming the file and the key."""
    raw = read_yaml_file(path, "synonym dictionary", "YAML")
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{path}: expected a mapping of term -> [equivalents], got {type(raw).__name__}"
        )
    out: dict[str, list[str]] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key.strip():
            raise ConfigError(f"{path}: key {key!r}: a term must be a non-empty string")
        values: Any = [value] if isinstance(value, str) else value
        if (
            not isinstance(values, list)
            or not values
            or not all(isinstance(v, str) and v.strip() for v in values)
        ):
            raise ConfigError(
                f"{path}: key {key!r}: expected a string or a list of non-empty strings, "
                f"got {value!r}"
            )
        out[key.strip()] = [v.strip() for v in values]
    return out


class SynonymExpansion:
    """Args:
    path: the YAML dictionary, ``term: [equivalents]`` (``PLC: [可编程逻辑控制器]``).
    bidirectional: read every entry both ways (a query with 可编程逻辑控制器 also gets ``PLC``).
    max_added: most equivalents appended to one query.
    Each equivalent of a term the query names is appended after a space, unless the query already
    contains it (matching rules: ``rag_lab.query_transforms._expansion``). The dictionary is read
    once, when the stage is built; its entries are part of the expanded text, so they key the
    retriever runs like any other query change.
    """

    def __init__(self, path: str, bidirectional: bool = True, max_added: int = 8) -> None:
        self.path = Path(path)
        table = read_dictionary(self.path)
        if boolean(bidirectional, "bidirectional"):
            table = symmetric(table)
        self.expander = Expander(table, integer(max_added, "max_added", ge=1))
        self.stats: dict[str, float] = {}

    def transform(self, queries: Mapping[str, str]) -> dict[str, str]:
        out, self.stats = expand_all(self.expander, queries)
        return out
