"""First-stage retrievers: ``bm25`` (bm25s / rank-bm25) and ``dense`` (faiss); foreign components
through the adapters: ``langchain``, ``llamaindex`` and ``foreign_pipeline`` (a whole LangChain
runnable or LlamaIndex query engine, evaluated end to end)."""

from rag_lab.retrievers.base import FilteredRetriever, PersistentRetriever, Retriever
from rag_lab.retrievers.bm25 import BM25Retriever
from rag_lab.retrievers.dense import DenseRetriever
from rag_lab.retrievers.foreign_pipeline import ForeignPipelineRetriever
from rag_lab.retrievers.langchain import LangChainRetriever
from rag_lab.retrievers.llamaindex import LlamaIndexRetriever

__all__ = [
    "Retriever",
    "FilteredRetriever",
    "PersistentRetriever",
    "BM25Retriever",
    "DenseRetriever",
    "LangChainRetriever",
    "LlamaIndexRetriever",
    "ForeignPipelineRetriever",
]
