"""LangChain currency for the adapters: rag_lab's chunks as ``Document``s, rag_lab's embedder as
an ``Embeddings``, and what a retriever or chain returns as ``Source``s.

Imports ``langchain_core`` (a dependency of ragas, so always installed); import this module only
where a LangChain adapter is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import Embeddings

from rag_lab.adapters.mapping import Source
from rag_lab.cache.keys import model_table, text_key
from rag_lab.embedder.base import Embedder
from rag_lab.types import Chunk

CONTENT = ("index_text", "text")


def chunk_content(chunk: Chunk, content: str) -> str:
    """What a foreign component sees of a chunk: ``index_text`` (title, section path and text: what
    rag_lab's own retrievers index, so a vector store over the same embedder ranks as
    ``retrievers=[dense]``) or the bare ``text``."""
    return chunk.index_text if content == "index_text" else chunk.text


def to_documents(chunks: Sequence[Chunk], content: str = "index_text") -> list[LCDocument]:
    """One ``Document`` per chunk, ``metadata={"doc_id", "chunk_id", "title", "section"}``: what
    ``rag_lab.adapters.mapping`` maps back by id."""
    return [
        LCDocument(
            page_content=chunk_content(c, content),
            metadata={
                "doc_id": c.doc_id,
                "chunk_id": c.chunk_id,
                "title": c.title,
                "section": c.section,
            },
            id=c.chunk_id,
        )
        for c in chunks
    ]


def to_source(doc: Any) -> Source:
    """A returned ``Document`` (or a plain string) as a ``Source``."""
    if isinstance(doc, LCDocument):
        return Source(doc.page_content, dict(doc.metadata or {}))
    if isinstance(doc, str):
        return Source(doc)
    raise TypeError(f"expected a langchain Document or a string, got {type(doc).__name__}")


class RagLabEmbeddings(Embeddings):
    """rag_lab's ``Embedder`` behind LangChain's ``Embeddings`` interface (query and document
    encodings kept apart, as the embedder defines them). ``cache``: a view of the stage cache's
    ``embeddings`` namespace; document vectors are then shared with ``retrievers=[dense]`` over
    the same embedder (one table per embedder identity, one row per text)."""

    def __init__(self, embedder: Embedder, cache: Any | None = None) -> None:
        self.embedder = embedder
        self.cache = cache

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return embed_documents(self.embedder, list(texts), self.cache).tolist()

    def embed_query(self, text: str) -> list[float]:
        return np.asarray(self.embedder.encode_queries([text]), dtype=np.float32)[0].tolist()


def embed_documents(embedder: Embedder, texts: list[str], cache: Any | None) -> np.ndarray:
    """Document vectors of ``texts`` in order, through the cache view when there is one."""
    if not texts:
        return np.zeros((0, embedder.dimension), dtype=np.float32)
    if cache is None:
        return np.asarray(embedder.encode_documents(texts), dtype=np.float32)
    table = model_table(embedder.identity)
    keys = [text_key(t) for t in texts]
    known = cache.get_vectors(table, keys)
    todo = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in known))
    if todo:
        vecs = np.asarray(embedder.encode_documents(todo), dtype=np.float32)
        fresh = {text_key(t): v for t, v in zip(todo, vecs)}
        cache.put_vectors(table, fresh)
        known.update(fresh)
    return np.stack([known[k] for k in keys]).astype(np.float32)
