"""Exports: a finished pipeline frozen into a self-contained folder (``bundle``), checked by its
manifest (``manifest``), loaded back behind the allow-list (``load``) and served as an MLflow
pyfunc model (``pyfunc``)."""

from rag_lab.export.bundle import export_pipeline, export_sweep
from rag_lab.export.load import ExportedPipeline, evaluate_exported, load_pipeline

__all__ = [
    "ExportedPipeline",
    "evaluate_exported",
    "export_pipeline",
    "export_sweep",
    "load_pipeline",
]
