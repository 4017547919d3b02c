"""Post-retrieval stages, run in order on the fused run: ``postprocess=[cross_encoder,freshness]``.
Rerankers (``rag_lab.reranker``: cross-encoder, rules) are post-processors too."""

from rag_lab.postprocess.base import PostProcessor
from rag_lab.postprocess.conflicts import ConflictDetector
from rag_lab.postprocess.credibility import CredibilityFilter
from rag_lab.postprocess.editions import EditionFilter
from rag_lab.postprocess.freshness import FreshnessFilter
from rag_lab.postprocess.metadata_filter import MetadataFilter

__all__ = [
    "ConflictDetector",
    "CredibilityFilter",
    "EditionFilter",
    "FreshnessFilter",
    "MetadataFilter",
    "PostProcessor",
]
