"""Chunkers: documents → chunks (``none`` = whole document, ``fixed_size``, ``recursive``)."""

from rag_lab.chunker.base import Chunker, SpanChunker
from rag_lab.chunker.fixed_size import FixedSizeChunker
from rag_lab.chunker.none import NoneChunker
from rag_lab.chunker.recursive import RecursiveChunker

__all__ = ["Chunker", "SpanChunker", "NoneChunker", "FixedSizeChunker", "RecursiveChunker"]
