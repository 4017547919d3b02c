"""Moved to :mod:`rag_lab.cli.judge` (every command lives in the ``rag_lab.cli`` package). This
path stays importable: it is the same module object."""

import sys

from rag_lab.cli import judge as _new
from rag_lab.cli.judge import (  # noqa: F401  (the names type checkers see at the old path)
    build_runner,
    main,
    parser,
    read_logs,
    run,
)

sys.modules[__name__] = _new
