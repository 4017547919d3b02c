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

__all__ = ["OptionError", "boolean", "choice", "integer", "number", "weights"]


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
