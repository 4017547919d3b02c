"""Second-stage rerankers. The ``reranker`` config group defaults to none; ``cross_encoder``
re-scores the head of the fused run."""

from rag_lab.reranker.base import Reranker
from rag_lab.reranker.cross_encoder import CrossEncoderReranker

__all__ = ["CrossEncoderReranker", "Reranker"]
