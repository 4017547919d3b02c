"""Moved to :mod:`rag_lab.cli.export` (every command lives in the ``rag_lab.cli`` package). This
path stays importable: it is the same module object."""

import sys

from rag_lab.cli import export as _new
from rag_lab.cli.export import (  # noqa: F401  (the names type checkers see at the old path)
    main,
    parser,
    run,
)

sys.modules[__name__] = _new
