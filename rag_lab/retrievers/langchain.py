"""Any LangChain retriever as a ``retrievers`` member: a ``BaseRetriever`` (or a vector store,
used through ``as_retriever``) built by an import path over rag_lab's chunks.

    retrievers.langchain.factory=langchain_community.retrievers.BM25Retriever.from_documents

See ``rag_lab.adapters.factory`` for the calling convention and ``rag_lab.adapters.imports`` for
the allow-list (``allow_imports`` opts a package in). Returned documents are mapped back onto chunk
ids (``rag_lab.adapters.mapping``: by the ``chunk_id`` metadata the corpus documents carry, else
by text) and scored ``1 / rank``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.adapters.mapping import Source
from rag_lab.errors import ConfigError
from rag_lab.retrievers._adapter import AdapterRetriever


def with_k(retriever: Any, k: int) -> Any:
    """``retriever`` returning up to ``k`` documents, where its fields say how: a vector store
    retriever's ``search_kwargs["k"]``, a retriever's own ``k`` (BM25Retriever, TFIDFRetriever);
    otherwise unchanged (the run is cut to ``k`` after)."""
    fields = getattr(type(retriever), "model_fields", {})
    if "search_kwargs" in fields:
        return retriever.model_copy(
            update={"search_kwargs": {**(retriever.search_kwargs or {}), "k": k}}
        )
    if "k" in fields:
        return retriever.model_copy(update={"k": k})
    return retriever


class LangChainRetriever(AdapterRetriever):
    """Args:
    factory: import path of the callable that builds the retriever (a class, or a class method
        such as ``...BM25Retriever.from_documents``; a ``VectorStore`` it returns is used through
        ``as_retriever(**as_retriever)``).
    kwargs: the factory's other arguments.
    corpus_argument: the argument given the chunks as ``Document``s (``documents``); null: none.
    embedder: rag_lab's embedder (``${embedder}``), given wrapped as LangChain ``Embeddings``
        under ``embedder_argument`` (``embedding``); null ``embedder_argument``: unused.
    content: what a document holds: ``index_text`` (title, section, text: as rag_lab's own
        retrievers index) or ``text``.
    as_retriever: arguments of ``VectorStore.as_retriever`` (``search_type: mmr``).
    allow_imports: package prefixes outside the allow-list that ``factory`` may name (opt-in).
    """

    framework = "langchain"

    def __init__(
        self,
        factory: str,
        kwargs: Mapping[str, Any] | None = None,
        corpus_argument: str | None = "documents",
        embedder: Any | None = None,
        embedder_argument: str | None = None,
        content: str = "index_text",
        as_retriever: Mapping[str, Any] | None = None,
        allow_imports: Sequence[str] = (),
    ) -> None:
        super().__init__(
            factory, kwargs, corpus_argument, embedder, embedder_argument, content, allow_imports
        )
        self.as_retriever = dict(as_retriever or {})

    def recipe(self) -> dict[str, Any]:
        return {**super().recipe(), "as_retriever": self.as_retriever}

    def component(self) -> Any:
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.vectorstores import VectorStore

        built = super().component()
        if isinstance(built, VectorStore):
            built = self._component = built.as_retriever(**self.as_retriever)
        if not isinstance(built, BaseRetriever):
            raise ConfigError(
                f"factory={self.factory!r} built a {type(built).__name__}, not a langchain "
                "BaseRetriever or VectorStore"
            )
        return built

    def sources(self, component: Any, query: str, k: int) -> list[Source]:
        from rag_lab.adapters.langchain import to_source

        return [to_source(d) for d in with_k(component, k).invoke(query)]
