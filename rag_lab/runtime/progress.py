"""Progress for the long steps (parsing many files, OCR, encoding, reranking, training): one
decision, :func:`mode` (``bar`` / ``log`` / ``off``), and one reporter, :func:`bar`: a tqdm bar on
stderr at a terminal, **one log line at a steady interval** elsewhere (a CI log, ``nohup``, a
notebook's captured stderr) — ``embed: 96/204 text (47%), 6.9 text/s, ETA 16 s`` every
``$RAG_LAB_PROGRESS_INTERVAL`` seconds (30), so slow can be told from stuck.

The decision, first match wins:

1. :func:`configure` (``progress=true|false|auto`` of a Hydra task,
``rag_lab.report.console.setup``); 2. ``$RAG_LAB_PROGRESS`` (``1``/``true``/``on`` or
``0``/``false``/``off``; ``auto`` or unset:
   go on);
3. auto: a bar when stderr is a terminal and ``$CI`` is unset (GitHub Actions, GitLab, ... set
   ``CI=true``); log lines otherwise.

A forced ``false`` is silence (no bars, no lines). So a bar never lands in a log file or a CI log,
a user at a terminal sees one, and a log shows a line every interval of a step that runs longer.
Libraries that draw their own bars (sentence-transformers' ``Batches``, transformers' ``Loading
weights`` and ``Trainer``) draw them only in ``bar`` mode: the callers pass :func:`enabled` on,
and :func:`sync_libraries` switches transformers' and huggingface_hub's global bars.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any, TypeVar

T = TypeVar("T")

ENV = "RAG_LAB_PROGRESS"
INTERVAL_ENV = "RAG_LAB_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 30.0
_ROW_KEYS = ("sentence_embedding", "scores")  # a batch's rows in sentence-transformers' outputs
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


def mode(
    stream: IO[str] | None = None,
    env: Mapping[str, str] | None = None,
    setting: Any = None,
) -> str:
    """``bar`` (tqdm on ``stream``, stderr), ``log`` (a line per interval) or ``off``.
    ``setting`` (``True`` / ``False`` / ``"auto"``) overrides :func:`configure`; ``env`` replaces
    ``os.environ`` (tests)."""
    env = os.environ if env is None else env
    forced = parse_setting(setting)
    if forced is None:
        forced = _configured
    if forced is None:
        forced = parse_setting(env.get(ENV), f"${ENV}")
    if forced is False:
        return "off"
    if forced:
        return "bar"
    if env.get("CI", "").strip().lower() not in _CI_OFF:
        return "log"
    stream = sys.stderr if stream is None else stream
    try:
        return "bar" if stream.isatty() else "log"
    except (AttributeError, ValueError):  # a closed or replaced stream
        return "log"


def enabled(
    stream: IO[str] | None = None,
    env: Mapping[str, str] | None = None,
    setting: Any = None,
) -> bool:
    """Whether long steps draw a *bar* (libraries' own bars follow this); see :func:`mode`."""
    return mode(stream, env, setting) == "bar"


def interval(env: Mapping[str, str] | None = None) -> float:
    """Seconds between two log lines of one step (``$RAG_LAB_PROGRESS_INTERVAL``, 30)."""
    raw = (os.environ if env is None else env).get(INTERVAL_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_INTERVAL
    except ValueError:
        value = -1.0
    if value <= 0:
        from rag_lab.errors import ConfigError

        raise ConfigError(f"${INTERVAL_ENV}={raw!r}: must be a number of seconds > 0")
    return value


def _seconds(s: float) -> str:
    s = max(0, round(s))
    return (
        f"{s // 3600} h {s % 3600 // 60:02d} min"
        if s >= 3600
        else (f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s")
    )


class LogProgress:
    """The bar's stand-in without a terminal: the same calls (iterate, ``update``, ``with``,
    ``set_postfix_str``, ``close``), and a line on the ``rag_lab.progress`` logger (INFO, which
    the console shows) once ``every`` seconds have passed since the last, never for a step that
    ends sooner: ``<desc>: <done>/<total> <unit> (<share>), <rate> <unit>/s, ETA <time>``."""

    log = logging.getLogger("rag_lab.progress")

    def __init__(
        self,
        iterable: Iterable[T] | None = None,
        *,
        total: int | None = None,
        desc: str,
        unit: str = "it",
        every: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.total, self.desc, self.unit, self.every, self.clock = total, desc, unit, every, clock
        self.n = 0
        self.lines: list[str] = []
        self._start = self._last = clock()
        self._postfix = ""

    def __iter__(self) -> Iterator[Any]:
        assert self.iterable is not None, "LogProgress(iterable) to iterate"
        for item in self.iterable:
            yield item
            self.update(1)

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self._postfix = text

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self._last >= self.every:
            self._last = now
            self._emit(now)

    def _emit(self, now: float) -> None:
        took = now - self._start
        rate = self.n / took if took > 0 else 0.0
        done = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        parts = [f"{self.desc}: {done} {self.unit}"]
        if self.total:
            parts[0] += f" ({100 * self.n / self.total:.0f}%)"
        parts.append(f"{rate:.3g} {self.unit}/s")
        if self.total and rate > 0:
            parts.append(f"ETA {_seconds((self.total - self.n) / rate)}")
        else:
            parts.append(f"running {_seconds(took)}")
        if self._postfix:
            parts.append(self._postfix)
        line = ", ".join(parts)
        self.lines.append(line)
        self.log.info(line)

    def close(self) -> None:
        pass


def bar(
    iterable: Iterable[T] | None = None,
    *,
    total: int | None = None,
    desc: str,
    unit: str = "it",
) -> Any:
    """A tqdm bar on stderr at a terminal (drawn once the step has run for half a second, cleared
    when done), a :class:`LogProgress` without one, nothing when progress is off. Use it as
    ``for x in bar(items, desc="parse", unit="file")`` or ``with bar(total=n, desc=...) as b:
    b.update(k)``."""
    how = mode()
    if how == "log":
        return LogProgress(iterable, total=total, desc=desc, unit=unit, every=interval())
    from tqdm import tqdm

    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        disable=how != "bar",
        delay=0.5,
        leave=False,
        file=sys.stderr,
        dynamic_ncols=True,
    )


@contextlib.contextmanager
def batches(module: Any, total: int, desc: str, unit: str) -> Iterator[None]:
    """Log lines (``log`` mode) for a library call that runs ``module`` (a torch module) once per
    batch and draws its own bar otherwise (``SentenceTransformer.encode``,
    ``CrossEncoder.predict``): a forward hook counts each batch's rows, so the call itself, and
    its batches, stay exactly as they were. Nothing in ``bar`` / ``off`` mode or for ``total``
    0."""
    if not total or mode() != "log" or not hasattr(module, "register_forward_hook"):
        yield
        return
    shown = LogProgress(total=total, desc=desc, unit=unit, every=interval())

    def count(_module: Any, _inputs: Any, output: Any) -> None:
        rows: Any = output
        if isinstance(output, Mapping):  # sentence-transformers: {"sentence_embedding": ...}
            rows = next((v for k, v in output.items() if k in _ROW_KEYS), None)
        shown.update(len(rows) if hasattr(rows, "__len__") else 1)

    hook = module.register_forward_hook(count)
    try:
        yield
    finally:
        hook.remove()


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


__all__ = [
    "ENV",
    "INTERVAL_ENV",
    "SETTINGS",
    "LogProgress",
    "bar",
    "batches",
    "configure",
    "enabled",
    "interval",
    "mode",
    "parse_setting",
    "sync_libraries",
]
