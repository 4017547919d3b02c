"""rag_lab: compose RAG pipelines declaratively (Hydra) and measure them honestly (MLflow)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import OmegaConf

if TYPE_CHECKING:
    import os

    from rag_lab.export import ExportedPipeline

__version__ = "0.1.0"

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# `${rag_lab_root:}` in configs: the checkout the package runs from, so shipped datasets and
# experiments/ resolve the same whatever the working directory.
if not OmegaConf.has_resolver("rag_lab_root"):
    OmegaConf.register_new_resolver("rag_lab_root", lambda: str(PROJECT_ROOT))


def load_pipeline(path: str | os.PathLike[str]) -> ExportedPipeline:
    """Load an export folder (see ``rag_lab.export.load_pipeline``); imported lazily so that
    ``import rag_lab`` stays light."""
    from rag_lab.export import load_pipeline as _load

    return _load(path)


__all__ = ["PROJECT_ROOT", "__version__", "load_pipeline"]
