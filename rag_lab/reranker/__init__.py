"""Second-stage rerankers. The ``reranker`` config group defaults to none."""

from rag_lab.reranker.base import Reranker

__all__ = ["Reranker"]
