"""Chunkers: documents → chunks (``none`` = whole document, ``fixed_size``, ``recursive``,
``section_schema``; ``langchain`` and ``llamaindex``: a foreign splitter or node parser)."""

from rag_lab.chunker.base import Chunker, SpanChunker
from rag_lab.chunker.fixed_size import FixedSizeChunker
from rag_lab.chunker.langchain import LangChainChunker
from rag_lab.chunker.llamaindex import LlamaIndexChunker
from rag_lab.chunker.none import NoneChunker
from rag_lab.chunker.recursive import RecursiveChunker
from rag_lab.chunker.section_schema import SectionSchemaChunker

__all__ = [
    "Chunker",
    "SpanChunker",
    "NoneChunker",
    "FixedSizeChunker",
    "RecursiveChunker",
    "SectionSchemaChunker",
    "LangChainChunker",
    "LlamaIndexChunker",
]
