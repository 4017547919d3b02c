"""A LlamaIndex retriever, index or query engine as a ``retrievers`` member, built by an import
path over rag_lab's chunks (as ``TextNode``s; ``pip install 'rag_lab[llamaindex]'``).

    retrievers.llamaindex.factory=llama_index.core.VectorStoreIndex

What the factory builds decides how it is queried: an index (``as_retriever``) or a
``BaseRetriever`` is asked for ``similarity_top_k=k`` nodes; a query engine (``BaseQueryEngine``)
answers, and its ``source_nodes`` are the run (its answer is not scored here: for that, evaluate
it end to end, ``retrievers=[foreign_pipeline]`` + ``generator=foreign_pipeline``). Returned
nodes map back onto chunk ids as for LangChain (``rag_lab.adapters.mapping``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.adapters.mapping import Source
from rag_lab.errors import ConfigError
from rag_lab.retrievers._adapter import AdapterRetriever


class LlamaIndexRetriever(AdapterRetriever):
    """Args:
    factory: import path of what builds the index, retriever or query engine
        (``llama_index.core.VectorStoreIndex``, or your own function).
    kwargs: the factory's other arguments.
    corpus_argument: the argument given the chunks as ``TextNode``s (``nodes``); null: none.
    embedder: rag_lab's embedder (``${embedder}``), given as a LlamaIndex ``BaseEmbedding`` under
        ``embedder_argument`` (``embed_model``).
    content: ``index_text`` (title, section, text) or ``text``.
    as_retriever: arguments of ``index.as_retriever`` besides ``similarity_top_k``.
    allow_imports: package prefixes outside the allow-list that ``factory`` may name (opt-in).
    """

    framework = "llamaindex"

    def __init__(
        self,
        factory: str,
        kwargs: Mapping[str, Any] | None = None,
        corpus_argument: str | None = "nodes",
        embedder: Any | None = None,
        embedder_argument: str | None = "embed_model",
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

    def sources(self, component: Any, query: str, k: int) -> list[Source]:
        from llama_index.core.base.base_query_engine import BaseQueryEngine
        from llama_index.core.base.base_retriever import BaseRetriever

        from rag_lab.adapters.llamaindex import to_source

        if isinstance(component, BaseQueryEngine):
            nodes = component.query(query).source_nodes
        elif isinstance(component, BaseRetriever):
            if hasattr(component, "similarity_top_k"):
                component.similarity_top_k = k
            nodes = component.retrieve(query)
        elif hasattr(component, "as_retriever"):  # an index
            retriever = component.as_retriever(similarity_top_k=k, **self.as_retriever)
            nodes = retriever.retrieve(query)
        else:
            raise ConfigError(
                f"factory={self.factory!r} built a {type(component).__name__}: not a llama_index "
                "index, BaseRetriever or BaseQueryEngine"
            )
        return [to_source(n) for n in nodes]
