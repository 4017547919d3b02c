"""Datasets: labelled query sets in the BEIR layout."""

from rag_lab.dataset.base import Dataset, LabelledQueries
from rag_lab.dataset.beir import BeirDataset, read_qrels, read_queries

__all__ = ["Dataset", "LabelledQueries", "BeirDataset", "read_qrels", "read_queries"]
