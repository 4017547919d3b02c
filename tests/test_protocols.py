"""``implements`` answers as ``isinstance`` does for shipped stages that declare capabilities."""

from __future__ import annotations

import pytest

from rag_lab.postprocess import ConflictDetector, CredibilityFilter
from rag_lab.protocols import (
    Annotating,
    CacheAware,
    ChunkAssessing,
    Measured,
    QueryMetadataAware,
    implements,
)
from rag_lab.retrievers import BM25Retriever
from rag_lab.tokenizer import WhitespaceTokenizer

CAPABILITIES = (Annotating, CacheAware, ChunkAssessing, Measured, QueryMetadataAware)


@pytest.mark.parametrize(
    "make",
    [ConflictDetector, CredibilityFilter, lambda: BM25Retriever(WhitespaceTokenizer()), object],
)
def test_implements_is_isinstance(make):
    stage = make()
    for capability in CAPABILITIES:
        assert implements(stage, capability) is isinstance(stage, capability)
        assert implements(stage, capability) is isinstance(stage, capability)  # remembered
    assert implements(ConflictDetector(), Annotating) and not implements(object(), Annotating)
