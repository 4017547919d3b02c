"""Experiment tracking (MLflow). ``tracking=none`` disables it."""

from rag_lab.tracking.mlflow import MlflowTracker, flatten, sanitize_key

__all__ = ["MlflowTracker", "flatten", "sanitize_key"]
