"""rag_lab: compose RAG pipelines declaratively (Hydra) and measure them honestly (MLflow)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rag_lab import _deprecated
from rag_lab._version import __version__
from rag_lab.paths import register_resolvers

if TYPE_CHECKING:
    import os

    from rag_lab.export.load import ExportedPipeline


register_resolvers()
_deprecated.install()  # old import paths of modules moved in 0.5, with a warning


def load_pipeline(path: str | os.PathLike[str]) -> ExportedPipeline:
    """Load an export folder (see ``rag_lab.export.load.load_pipeline``); imported lazily so that
    ``import rag_lab`` stays light."""
    from rag_lab.export.load import load_pipeline as _load

    return _load(path)


__all__ = ["__version__", "load_pipeline"]
