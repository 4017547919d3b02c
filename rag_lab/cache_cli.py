"""Moved to :mod:`rag_lab.cli.cache` (every command lives in the ``rag_lab.cli`` package). This
path stays importable: it is the same module object."""

import sys

from rag_lab.cli import cache as _new
from rag_lab.cli.cache import (  # noqa: F401  (the names type checkers see at the old path)
    human,
    main,
)

sys.modules[__name__] = _new
