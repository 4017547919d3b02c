"""Errors with a message a user can act on (file, line, key)."""

from __future__ import annotations


class RagLabError(Exception):
    """A user-facing error: the CLI prints ``error: <message>`` on one line and exits non-zero."""


class DataError(RagLabError):
    """Bad input data: missing file, malformed line, duplicate ids, empty corpus."""


class ConfigError(RagLabError):
    """A configuration that cannot be built (unknown option, unresolvable model)."""
