"""Small foreign pipelines made of real LangChain / LlamaIndex components, for trying the
end-to-end adapter (``retrievers=[foreign_pipeline]``) and as the "tutorial RAG" a team starts
from: a vector store over the corpus, top-``k`` sources, an answer from them. The "LLM" is
rag_lab's extractive baseline (``rag_lab.generator.ExtractiveGenerator``), so they run offline and
answer as ``generator=extractive`` would from the same sources.

Both are factories in the adapters' calling convention (``rag_lab.adapters.factory``): the corpus
and rag_lab's embedder, wrapped for the framework, come in as arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_lab.generator.extractive import ExtractiveGenerator
from rag_lab.tokenizer.base import Tokenizer
from rag_lab.types import Chunk


def _chunk(text: str, metadata: Any, i: int) -> Chunk:
    """A source as the chunk the extractive "LLM" reads: its text without the title and section
    line that ``content: index_text`` puts first (as ``generator=extractive`` reads chunks)."""
    meta = dict(metadata or {})
    cid = str(meta.get("chunk_id", f"source#{i}"))
    head = " ".join(str(p) for p in (meta.get("title"), meta.get("section")) if p)
    if head and text.startswith(head + "\n"):
        text = text[len(head) + 1 :]
    return Chunk(cid, str(meta.get("doc_id", cid)), text, 0, len(text), str(meta.get("title", "")))


def tutorial_chain(
    documents: Sequence[Any],
    embedding: Any,
    k: int = 3,
    max_sentences: int = 2,
    tokenizer: Tokenizer | None = None,
) -> Any:
    """An LCEL runnable: ``invoke(question)`` → ``{"question", "source_documents", "answer"}``;
    the sources are the top ``k`` of an ``InMemoryVectorStore`` over ``documents``; ``tokenizer``:
    the extractive answer's term analysis (``kwargs.tokenizer: ${tokenizer}``, as
    ``generator=extractive`` uses)."""
    from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore.from_documents(list(documents), embedding)
    retriever = store.as_retriever(search_kwargs={"k": k})
    llm = ExtractiveGenerator(max_sentences=max_sentences, tokenizer=tokenizer)

    def answer(inputs: dict[str, Any]) -> str:
        docs = inputs["source_documents"]
        return llm.generate(
            inputs["question"], [_chunk(d.page_content, d.metadata, i) for i, d in enumerate(docs)]
        )

    return RunnableParallel(question=RunnablePassthrough(), source_documents=retriever).assign(
        answer=RunnableLambda(answer)
    )


def tutorial_query_engine(
    nodes: Sequence[Any],
    embed_model: Any,
    k: int = 3,
    max_sentences: int = 2,
    tokenizer: Tokenizer | None = None,
) -> Any:
    """A LlamaIndex query engine: ``query(question)`` → a ``Response`` whose ``source_nodes`` are
    the top ``k`` of a ``VectorStoreIndex`` over ``nodes``."""
    from llama_index.core import VectorStoreIndex
    from llama_index.core.base.response.schema import Response
    from llama_index.core.query_engine import CustomQueryEngine
    from llama_index.core.retrievers import BaseRetriever

    index = VectorStoreIndex(list(nodes), embed_model=embed_model)
    llm = ExtractiveGenerator(max_sentences=max_sentences, tokenizer=tokenizer)

    class TutorialQueryEngine(CustomQueryEngine):
        retriever: BaseRetriever

        def custom_query(self, query_str: str) -> Response:
            found = self.retriever.retrieve(query_str)
            chunks = [_chunk(n.node.get_content(), n.node.metadata, i) for i, n in enumerate(found)]
            return Response(response=llm.generate(query_str, chunks), source_nodes=found)

    return TutorialQueryEngine(retriever=index.as_retriever(similarity_top_k=k))
