"""Errors with a message a user can act on (file, line, key), and how every ``rag-lab`` command
reports one: ``error: <message>`` on one line of stderr, no traceback, exit status 2 (``fail``,
``user_errors``). Written once, here: commands, the console's logging set-up and the sweep
launcher's workers all report through it."""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, ParamSpec, TypeVar


class RagLabError(Exception):
    """A user-facing error: the CLI prints ``error: <message>`` on one line and exits non-zero."""


class DataError(RagLabError):
    """Bad input data: missing file, malformed line, duplicate ids, empty corpus."""


class ConfigError(RagLabError):
    """A configuration that cannot be built (unknown option, unresolvable model)."""


# a write that cannot succeed until the user frees space or remounts: full disk, exhausted quota,
# read-only file system
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def is_disk_error(exc: BaseException) -> bool:
    """Whether ``exc`` is an ``OSError`` of :data:`DISK_ERRNOS`."""
    return isinstance(exc, OSError) and exc.errno in DISK_ERRNOS


# SQLite reports a full disk as an OperationalError, not an OSError; MLflow's store and
# SQLAlchemy wrap it (the message is kept along the chain)
_SQLITE_FULL = ("database or disk is full", "attempt to write a readonly database")


def full_database(exc: BaseException) -> str | None:
    """SQLite's message when ``exc`` (or an exception it was raised from) is a full disk or a
    read-only database file (the MLflow store, the stage cache), else ``None``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        for message in _SQLITE_FULL:
            if message in text:
                return message
        current = current.__cause__ or current.__context__
    return None


class DiskError(RagLabError):
    """A write refused by the file system (:data:`DISK_ERRNOS`), naming the path. Finished stages
    are in the stage cache (when ``cache.dir`` is elsewhere or still had room), so a rerun after
    freeing space redoes only what was not finished."""

    @classmethod
    def of(cls, exc: OSError, path: str | os.PathLike[str] | None = None) -> DiskError:
        where = path if path is not None else exc.filename
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        return cls(
            f"cannot write {Path(where) if where is not None else 'a file'}: {reason.lower()}; "
            "free space (or make it writable) and run again: finished stages are kept in the "
            "stage cache"
        )


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
    line on stderr, no traceback) and exit status 2; so is an ``OSError`` of a full disk, an
    exhausted quota or a read-only file system raised anywhere in ``fn`` (:class:`DiskError`,
    naming the file when the error does), and SQLite's own "database or disk is full"
    (:func:`full_database`). Other exceptions are bugs: they propagate.

    Under ``@hydra.main`` put it innermost (next to the function): Hydra lets ``SystemExit``
    through, and unwraps ``__wrapped__`` to name the job after the module."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except RagLabError as exc:
            fail(str(exc))
        except OSError as exc:
            if not is_disk_error(exc):
                raise
            fail(str(DiskError.of(exc)))
        except Exception as exc:
            message = full_database(exc)
            if message is None:
                raise
            fail(
                f"a SQLite database could not be written ({message}): the MLflow store "
                "(tracking.uri) or the stage cache (cache.dir); free space (or make it writable) "
                "and run again: finished stages are kept in the stage cache"
            )

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
