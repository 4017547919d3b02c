"""First-stage retrievers: ``bm25`` (bm25s / rank-bm25), ``dense`` (faiss), ``entity`` (the
entities a chunk names) and dense retrieval in vector stores (``qdrant``, ``lancedb``,
``pgvector``); foreign components
through the adapters: ``langchain``, ``llamaindex`` and ``foreign_pipeline`` (a whole LangChain
runnable or LlamaIndex query engine, evaluated end to end)."""

from rag_lab.retrievers.base import FilteredRetriever, PersistentRetriever, Retriever
from rag_lab.retrievers.bm25 import BM25Retriever
from rag_lab.retrievers.dense import DenseRetriever
from rag_lab.retrievers.entity import EntityRetriever
from rag_lab.retrievers.foreign_pipeline import ForeignPipelineRetriever
from rag_lab.retrievers.lancedb import LanceDBRetriever
from rag_lab.retrievers.langchain import LangChainRetriever
from rag_lab.retrievers.llamaindex import LlamaIndexRetriever
from rag_lab.retrievers.pgvector import PgvectorRetriever
from rag_lab.retrievers.qdrant import QdrantRetriever

__all__ = [
    "Retriever",
    "FilteredRetriever",
    "PersistentRetriever",
    "BM25Retriever",
    "DenseRetriever",
    "EntityRetriever",
    "QdrantRetriever",
    "LanceDBRetriever",
    "PgvectorRetriever",
    "LangChainRetriever",
    "LlamaIndexRetriever",
    "ForeignPipelineRetriever",
]
