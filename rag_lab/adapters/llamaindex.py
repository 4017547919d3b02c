"""LlamaIndex currency for the adapters: rag_lab's chunks as ``TextNode``s, rag_lab's embedder as
a ``BaseEmbedding``, and returned nodes as ``Source``s.

Needs ``llama-index-core`` (``pip install 'rag_lab[llamaindex]'``); import this module only where
a LlamaIndex adapter is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.schema import BaseNode, NodeWithScore, TextNode
from pydantic import PrivateAttr

from rag_lab.adapters.langchain import chunk_content, embed_documents
from rag_lab.adapters.mapping import Source
from rag_lab.embedder.base import Embedder
from rag_lab.types import Chunk

# the metadata every node carries; kept out of what is embedded and what an LLM reads, so a node's
# vector is that of the chunk's content alone (as in rag_lab's dense retriever)
_KEYS = ["doc_id", "chunk_id", "title", "section"]


def to_nodes(chunks: Sequence[Chunk], content: str = "index_text") -> list[TextNode]:
    """One ``TextNode`` per chunk (``id_`` = chunk id, metadata ``doc_id``, ``chunk_id``,
    ``title``, ``section``)."""
    return [
        TextNode(
            id_=c.chunk_id,
            text=chunk_content(c, content),
            metadata={
                "doc_id": c.doc_id,
                "chunk_id": c.chunk_id,
                "title": c.title,
                "section": c.section,
            },
            excluded_embed_metadata_keys=list(_KEYS),
            excluded_llm_metadata_keys=list(_KEYS),
        )
        for c in chunks
    ]


def to_source(node: Any) -> Source:
    """A returned ``NodeWithScore`` / node as a ``Source`` (its text without metadata)."""
    if isinstance(node, NodeWithScore):
        node = node.node
    if isinstance(node, BaseNode):
        return Source(node.get_content(), dict(node.metadata or {}))
    if isinstance(node, str):
        return Source(node)
    raise TypeError(f"expected a llama_index node, got {type(node).__name__}")


class RagLabEmbedding(BaseEmbedding):
    """rag_lab's ``Embedder`` as a LlamaIndex ``BaseEmbedding`` (query and document encodings kept
    apart); ``cache``: a view of the ``embeddings`` namespace, as ``RagLabEmbeddings``."""

    _embedder: Any = PrivateAttr()
    _cache: Any = PrivateAttr(default=None)

    def __init__(self, embedder: Embedder, cache: Any | None = None, **kwargs: Any) -> None:
        super().__init__(model_name=f"rag_lab:{type(embedder).__name__}", **kwargs)
        self._embedder = embedder
        self._cache = cache

    def _get_query_embedding(self, query: str) -> list[float]:
        vec = np.asarray(self._embedder.encode_queries([query]), dtype=np.float32)[0]
        return [float(x) for x in vec]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return embed_documents(self._embedder, list(texts), self._cache).tolist()
