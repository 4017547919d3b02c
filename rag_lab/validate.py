"""Checks of a stage's constructor arguments (numbers, choices, flags), one line per mistake.

A stage does not know where in the config it sits, so an :class:`OptionError` names the argument
as written (``k=-10.5: must be >= 0``). It is a ``ValueError``, so
``rag_lab.pipeline.build.instantiate`` reports it as ``cannot build fusion: OptionError: k=-10.5:
must be >= 0`` (the stage and the argument: ``fusion.k``); :meth:`OptionError.at` gives the
``ConfigError`` with the full key (``fusion.k=-10.5: must be >= 0``) where the caller knows it.

The value must already be of the right kind: Hydra passes ``retrievers.bm25.k1=abc`` on as the
string ``'abc'`` (plain YAML has no types), and that is refused, not coerced. Booleans are not
numbers here (``True`` is an ``int`` to Python, never a sensible ``k``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from rag_lab.errors import ConfigError

__all__ = [
    "OptionError",
    "boolean",
    "check_added_keys",
    "choice",
    "integer",
    "number",
    "weights",
]


class OptionError(ValueError):
    """An argument of the wrong kind or out of range: ``str()`` is ``<name>=<value>: <reason>``."""

    def __init__(self, name: str, value: object, reason: str) -> None:
        self.name, self.value, self.reason = name, value, reason
        super().__init__(f"{name}={_show(value)}: {reason}")

    def at(self, where: str) -> ConfigError:
        """The same mistake as a ``ConfigError`` naming the full key (``where`` + ``.name``)."""
        return ConfigError(f"{where}.{self}" if where else str(self))


def _show(value: object) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _bounds(
    x: float, name: str, value: object, gt: float | None, ge: float | None, le: float | None
) -> None:
    if gt is not None and not x > gt:
        raise OptionError(name, value, f"must be > {gt:g}")
    if ge is not None and not x >= ge:
        raise OptionError(name, value, f"must be >= {ge:g}")
    if le is not None and not x <= le:
        raise OptionError(name, value, f"must be <= {le:g}")


def number(
    value: Any,
    name: str,
    *,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
) -> float:
    """``value`` as a finite float within the bounds; ``OptionError`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OptionError(name, value, "must be a number")
    x = float(value)
    if not math.isfinite(x):
        raise OptionError(name, value, "must be a finite number")
    _bounds(x, name, value, gt, ge, le)
    return x


def integer(
    value: Any,
    name: str,
    *,
    gt: int | None = None,
    ge: int | None = None,
    le: int | None = None,
) -> int:
    """``value`` as an int within the bounds (``512.0`` is accepted as 512, ``1.5`` is not)."""
    if isinstance(value, float) and value.is_integer():
        value_int = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        value_int = value
    else:
        raise OptionError(name, value, "must be an integer")
    _bounds(value_int, name, value, gt, ge, le)
    return value_int


def choice(value: Any, name: str, options: Collection[str]) -> str:
    """``value`` if it is one of ``options``."""
    if not isinstance(value, str) or value not in options:
        raise OptionError(name, value, f"must be one of {', '.join(options)}")
    return value


def boolean(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise OptionError(name, value, "must be true or false")
    return value


def weights(value: Any, name: str = "weights") -> dict[str, float]:
    """A ``{retriever name: weight}`` mapping of finite weights ``>= 0`` (``None`` = empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise OptionError(name, value, "must be a mapping of retriever name to weight")
    return {str(k): number(v, f"{name}.{k}", ge=0) for k, v in value.items()}


# rag_lab's own settings sections (conf/evaluate.yaml): plain keys, not a stage's constructor
# arguments (a stage refuses an unknown argument when it is built) nor free-form maps
SETTINGS_SECTIONS = ("evaluation", "cache", "sweep", "paths")
# maps under them that take keys of the user's choosing ({metric: minimum})
FREE_FORM = ("sweep.floors",)


def check_added_keys(
    cfg: Mapping[str, Any],
    overrides: Collection[str],
    sections: Collection[str] = SETTINGS_SECTIONS,
) -> None:
    """Refuse a key added with ``+`` that none of rag_lab's settings has.

    Hydra adds ``+evaluation.retrive_k=5`` as a new key and nothing reads it: the run goes on
    with the default. A key added under one of ``sections`` must be one the section has (its
    keys in ``cfg`` less the ones these overrides made); a map of ``FREE_FORM``
    (``sweep.floors``) takes any key. A key added at the top level, or under a misspelt
    section (``+evalution.x=1``), is refused only when it is close to a known one
    (``+run_nam=x``): a new top-level key may be a user's own interpolation source. ``++``
    (add or override) is not checked: after composition a new key and an existing one look
    alike. The error names the override and the closest known key (``did you mean
    evaluation.retrieve_k?``)."""
    import difflib

    added: dict[str, str] = {}  # key -> the override as written
    for override in overrides:
        if override.startswith("+") and not override.startswith("++") and "=" in override:
            key = override[1:].split("=", 1)[0].strip()
            if key and "/" not in key and "@" not in key:  # a group's option: Hydra checks it
                added[key] = override
    for key, override in added.items():
        parts = key.split(".")
        near_a_section = difflib.get_close_matches(parts[0], list(sections), n=1, cutoff=0.8)
        if len(parts) > 1 and parts[0] not in sections and not near_a_section:
            continue  # under a stage or hydra: checked by whoever reads it
        if any(key.startswith(f"{free}.") for free in FREE_FORM):
            continue
        node: Any = cfg
        for depth, part in enumerate(parts):
            here = ".".join(parts[:depth])
            if not isinstance(node, Mapping) or "_target_" in node:
                break  # a value, or a stage's arguments
            known = sorted(
                str(k)
                for k in node
                if not _only_added(node, str(k), f"{here}.{k}" if here else str(k), added)
            )
            if part in known:
                node = node[part]
                continue
            close = difflib.get_close_matches(part, known, n=1, cutoff=0.6)
            name = f"{here}.{part}" if here else part
            if close:
                hint = f"did you mean {here + '.' if here else ''}{close[0]}?"
            elif depth == 0:
                break  # a new top-level key, not a typo of one
            else:
                hint = f"{here} has {', '.join(known)}"
            raise ConfigError(f"{override}: unknown key {name}; {hint}")


def _only_added(parent: Mapping[str, Any], key: str, path: str, added: Collection[str]) -> bool:
    """Whether ``parent[key]`` (at ``path``) exists only through the added keys: one of them, or
    a map all of whose keys are (``+evalution.retrieve_k=5`` makes ``evalution``)."""
    if path in added:
        return True
    if not any(a.startswith(f"{path}.") for a in added):
        return False
    child = parent[key]
    return isinstance(child, Mapping) and all(
        _only_added(child, str(k), f"{path}.{k}", added) for k in child
    )
