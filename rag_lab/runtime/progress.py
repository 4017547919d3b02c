"""Progress bars for the long steps (parsing many files, OCR, encoding, reranking, training):
one decision, :func:`enabled`, and one bar, :func:`bar` (tqdm, on stderr).

The decision, first match wins:

1. :func:`configure` (``progress=true|false|auto`` of a Hydra task,
``rag_lab.report.console.setup``); 2. ``$RAG_LAB_PROGRESS`` (``1``/``true``/``on`` or
``0``/``false``/``off``; ``auto`` or unset:
   go on);
3. auto: off when ``$CI`` is set (GitHub Actions, GitLab, ... set ``CI=true``) or stderr is not a
   terminal (a pipe, a log file), on otherwise.

So a bar never lands in a log file or a CI log, and a user at a terminal sees one. Libraries that
draw their own bars (sentence-transformers' ``Batches``, transformers' ``Loading weights`` and
``Trainer``) get the same decision: the callers pass :func:`enabled` on, and :func:`sync_libraries`
switches transformers' and huggingface_hub's global bars.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import IO, Any, TypeVar

T = TypeVar("T")

ENV = "RAG_LAB_PROGRESS"
SETTINGS = ("auto", "true", "false")
_ON = ("1", "true", "on", "yes")
_OFF = ("0", "false", "off", "no")
_CI_OFF = ("", "0", "false", "no")  # CI=false (or empty) is not a CI run

_configured: bool | None = None  # what configure() set; None = decide from the environment


def parse_setting(value: Any, where: str = "progress") -> bool | None:
    """``True`` / ``False`` for a forced setting, ``None`` for ``auto`` (or ``None``); anything else
    is a ``ConfigError`` naming ``where``."""
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("", "auto"):
        return None
    if text in _ON:
        return True
    if text in _OFF:
        return False
    from rag_lab.errors import ConfigError

    raise ConfigError(f"{where}={value!r}: use auto, true or false")


def configure(setting: Any) -> None:
    """Set the process-wide decision (``auto`` / ``None`` hands it back to the environment)."""
    global _configured
    _configured = parse_setting(setting)


def enabled(
    stream: IO[str] | None = None,
    env: Mapping[str, str] | None = None,
    setting: Any = None,
) -> bool:
    """Whether long steps draw a bar on ``stream`` (stderr). ``setting`` (``True`` / ``False`` /
    ``"auto"``) overrides :func:`configure`; ``env`` replaces ``os.environ`` (tests)."""
    env = os.environ if env is None else env
    forced = parse_setting(setting)
    if forced is None:
        forced = _configured
    if forced is None:
        forced = parse_setting(env.get(ENV), f"${ENV}")
    if forced is not None:
        return forced
    if env.get("CI", "").strip().lower() not in _CI_OFF:
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def bar(
    iterable: Iterable[T] | None = None,
    *,
    total: int | None = None,
    desc: str,
    unit: str = "it",
) -> Any:
    """A tqdm bar on stderr that draws only when :func:`enabled`, and only once the step has run
    for half a second (short steps print nothing); it clears itself when done. Use it as
    ``for x in bar(items, desc="parse", unit="file")`` or ``with bar(total=n, desc=...) as b:
    b.update(k)``."""
    from tqdm import tqdm

    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        disable=not enabled(),
        delay=0.5,
        leave=False,
        file=sys.stderr,
        dynamic_ncols=True,
    )


def sync_libraries() -> None:
    """Give transformers' (``Loading weights``) and huggingface_hub's global bars the same
    decision; called where a model is loaded (importing transformers costs seconds, so not at
    start-up). A library that is not installed is left alone."""
    on = enabled()
    try:
        from transformers.utils import logging as tf_logging
    except ImportError:
        pass
    else:
        (tf_logging.enable_progress_bar if on else tf_logging.disable_progress_bar)()
    try:
        from huggingface_hub import utils as hub_utils
    except ImportError:
        pass
    else:
        (hub_utils.enable_progress_bars if on else hub_utils.disable_progress_bars)()


__all__ = ["ENV", "SETTINGS", "bar", "configure", "enabled", "parse_setting", "sync_libraries"]
