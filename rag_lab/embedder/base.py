"""Embedder protocol: texts → dense vectors, with separate query and document encodings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Contract: ``encode_queries`` / ``encode_documents`` return ``float32`` arrays of shape
    ``(len(texts), dimension)`` in input order; similarity is the inner product (normalise for
    cosine). ``identity`` names what defines the vectors (model + weights hash + prompts +
    normalisation) so caches can key on it."""

    dimension: int

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    @property
    def identity(self) -> dict: ...
