"""Moved to :mod:`rag_lab.models` (model resolution is shared by embedders, rerankers, the NLI
judge, generators and training). This path stays importable: it is the same module object."""

import sys

from rag_lab import models as _models
from rag_lab.models import (  # noqa: F401  (the names type checkers see at the old path)
    OFFLINE_MODELS,
    _offline_help,
    cache_home,
    resolve_model,
    weights_hash,
)

sys.modules[__name__] = _models
