"""Moved to :mod:`rag_lab.cli.train` (the ``train`` row of ``rag_lab.cli.COMMANDS`` picks the
task). This path stays importable: it is the same module object."""

import sys

from rag_lab.cli import train as _new
from rag_lab.cli.train import (  # noqa: F401  (the names type checkers see at the old path)
    main,
)

sys.modules[__name__] = _new
