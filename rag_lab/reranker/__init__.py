"""Rerankers: re-score the head of the fused run. Every reranker is a post-processor too, so it
runs as the ``reranker`` group's one choice (first of the post-processors) or inside
``postprocess=[...]``: ``cross_encoder`` (a trained or pretrained cross-encoder) and ``rules``
(the metadata contract's fields)."""

from rag_lab.reranker.base import Reranker
from rag_lab.reranker.cross_encoder import CrossEncoderReranker
from rag_lab.reranker.rules import RuleReranker

__all__ = ["CrossEncoderReranker", "Reranker", "RuleReranker"]
