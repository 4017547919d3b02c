"""First-stage retrievers: ``bm25`` (bm25s / rank-bm25) and ``dense`` (faiss)."""

from rag_lab.retrievers.base import PersistentRetriever, Retriever
from rag_lab.retrievers.bm25 import BM25Retriever
from rag_lab.retrievers.dense import DenseRetriever

__all__ = ["Retriever", "PersistentRetriever", "BM25Retriever", "DenseRetriever"]
