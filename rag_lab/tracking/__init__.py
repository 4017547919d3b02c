"""Experiment tracking (MLflow). ``tracking=none`` disables it."""

from rag_lab.tracking.mlflow import MlflowRun, MlflowTracker, flatten, mlflow_keys, sanitize_key

__all__ = ["MlflowRun", "MlflowTracker", "flatten", "mlflow_keys", "sanitize_key"]
