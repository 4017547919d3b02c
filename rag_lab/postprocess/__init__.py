"""Post-retrieval stages, run in order on the fused run: ``postprocess=[cross_encoder,freshness]``.
Rerankers (``rag_lab.reranker``) are post-processors too."""

from rag_lab.postprocess.base import PostProcessor
from rag_lab.postprocess.conflicts import ConflictDetector
from rag_lab.postprocess.credibility import CredibilityFilter
from rag_lab.postprocess.freshness import FreshnessFilter
from rag_lab.postprocess.metadata_filter import MetadataFilter
from rag_lab.postprocess.rules import RuleReranker

__all__ = [
    "ConflictDetector",
    "CredibilityFilter",
    "FreshnessFilter",
    "MetadataFilter",
    "PostProcessor",
    "RuleReranker",
]
