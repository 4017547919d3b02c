"""Datasets: labelled query sets: BEIR folders, Hugging Face ``datasets``, ir_datasets ids and
SQuAD-format QA files (the last three written to a BEIR corpus, ``_records``) and MLflow
evaluation datasets (written to a BEIR folder)."""

from rag_lab.dataset.base import Dataset, LabelledQueries
from rag_lab.dataset.beir import BeirDataset, read_qrels, read_queries
from rag_lab.dataset.hf import HfDataset
from rag_lab.dataset.ir_datasets import IrDatasetsDataset
from rag_lab.dataset.mlflow_eval import MlflowEvalDataset
from rag_lab.dataset.squad import SquadDataset

__all__ = [
    "Dataset",
    "LabelledQueries",
    "BeirDataset",
    "HfDataset",
    "IrDatasetsDataset",
    "MlflowEvalDataset",
    "SquadDataset",
    "read_qrels",
    "read_queries",
]
