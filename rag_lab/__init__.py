"""rag_lab: compose RAG pipelines declaratively (Hydra) and measure them honestly (MLflow)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

__version__ = "0.1.0"

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# `${rag_lab_root:}` in configs: the checkout the package runs from, so shipped datasets and
# experiments/ resolve the same whatever the working directory.
if not OmegaConf.has_resolver("rag_lab_root"):
    OmegaConf.register_new_resolver("rag_lab_root", lambda: str(PROJECT_ROOT))

__all__ = ["PROJECT_ROOT", "__version__"]
