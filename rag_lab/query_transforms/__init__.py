"""Query transforms: run in order on every query before retrieval."""

from rag_lab.query_transforms.base import QueryTransform
from rag_lab.query_transforms.normalise import NormaliseQueries

__all__ = ["NormaliseQueries", "QueryTransform"]
