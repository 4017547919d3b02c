"""Errors with a message a user can act on (file, line, key), and how every ``rag-lab`` command
reports one: ``error: <message>`` on one line of stderr, no traceback, exit status 2 (``fail``,
``user_errors``). Written once, here: commands, the console's logging set-up and the sweep
launcher's workers all report through it."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import NoReturn, ParamSpec, TypeVar


class RagLabError(Exception):
    """A user-facing error: the CLI prints ``error: <message>`` on one line and exits non-zero."""


class DataError(RagLabError):
    """Bad input data: missing file, malformed line, duplicate ids, empty corpus."""


class ConfigError(RagLabError):
    """A configuration that cannot be built (unknown option, unresolvable model)."""


P = ParamSpec("P")
R = TypeVar("R")

USAGE_ERROR = 2  # argparse's status for a bad command line; ours for any refusal


def _never(message: str) -> bool:
    return False


# Whether another process of the same command already printed ``message``: the fork launcher's
# workers set it, so jobs refused for the same reason at once print one line, not one each.
printed_elsewhere: Callable[[str], bool] = _never


def fail(message: str, more: str = "") -> NoReturn:
    """``error: <message>`` on stderr (then ``more``, e.g. a usage text) and exit status 2."""
    if not printed_elsewhere(message):
        print(f"error: {message}" + (f"\n\n{more}" if more else ""), file=sys.stderr)
    raise SystemExit(USAGE_ERROR) from None


def user_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a :class:`RagLabError` raised by ``fn`` into ``error: <message>`` (one
    line on stderr, no traceback) and exit status 2. Other exceptions are bugs: they propagate.

    Under ``@hydra.main`` put it innermost (next to the function): Hydra lets ``SystemExit``
    through, and unwraps ``__wrapped__`` to name the job after the module."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except RagLabError as exc:
            fail(str(exc))

    return wrapper


def exit_status(main: Callable[[list[str]], object], argv: list[str]) -> int:
    """Run a command's ``main(argv)`` in-process and return its exit status instead of leaving the
    interpreter (``run(argv)`` of the argparse commands, for tests and scripts)."""
    try:
        main(argv)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
