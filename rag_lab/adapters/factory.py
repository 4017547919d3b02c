"""Build a foreign component (a LangChain retriever / vector store / chain, a LlamaIndex index /
retriever / query engine) from its import path, over rag_lab's chunks.

The one calling convention, shared by every adapter::

    factory(<corpus>, <embedder>, **kwargs)

- ``factory``: the import path of a class or a callable (``...BM25Retriever.from_documents``,
  ``...InMemoryVectorStore.from_documents``, ``llama_index.core.VectorStoreIndex``, your own
  ``my_rag.build_chain``), checked by ``rag_lab.adapters.imports.resolve``;
- ``corpus_argument``: the argument that receives the corpus (``documents``, ``nodes``), as
  LangChain ``Document``s or LlamaIndex ``TextNode``s made from rag_lab's chunks, each with
  ``metadata={"doc_id", "chunk_id", ...}``; ``null``: the component does not get the corpus (it
  reads its own index; its sources are then mapped by text);
- ``embedder_argument``: the argument that receives rag_lab's embedder wrapped for the framework
  (``embedding``, ``embed_model``); ``null``: none (the ``embedder`` config is then unused);
- ``kwargs``: everything else, as plain YAML values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.adapters.imports import resolve
from rag_lab.embedder.base import Embedder
from rag_lab.errors import ConfigError
from rag_lab.types import Chunk
from rag_lab.validate import OptionError

FRAMEWORKS = ("langchain", "llamaindex")


def corpus_for(framework: str, chunks: Sequence[Chunk], content: str) -> list[Any]:
    """``chunks`` as the framework's documents (LangChain) or nodes (LlamaIndex)."""
    if framework == "langchain":
        from rag_lab.adapters.langchain import to_documents

        return list(to_documents(chunks, content))
    from rag_lab.adapters.llamaindex import to_nodes

    return list(to_nodes(chunks, content))


def embeddings_for(framework: str, embedder: Embedder, cache: Any | None) -> Any:
    """rag_lab's embedder as the framework's embeddings object."""
    if framework == "langchain":
        from rag_lab.adapters.langchain import RagLabEmbeddings

        return RagLabEmbeddings(embedder, cache)
    from rag_lab.adapters.llamaindex import RagLabEmbedding

    return RagLabEmbedding(embedder, cache)


def build_component(
    framework: str,
    factory: str,
    chunks: Sequence[Chunk],
    *,
    corpus_argument: str | None,
    embedder: Embedder | None,
    embedder_argument: str | None,
    kwargs: Mapping[str, Any],
    allow_imports: Sequence[str] = (),
    content: str = "index_text",
    cache: Any | None = None,
) -> Any:
    """``factory(**{corpus_argument: corpus, embedder_argument: embeddings}, **kwargs)``;
    ``ConfigError`` naming the factory when it raises."""
    try:
        fn = resolve(factory, "factory", allow_imports)
    except OptionError as exc:  # checked when the stage was built; here the key is unknown
        raise ConfigError(str(exc)) from None
    args = dict(kwargs or {})
    if corpus_argument:
        args[corpus_argument] = corpus_for(framework, chunks, content)
    if embedder_argument:
        if embedder is None:
            raise ConfigError(
                f"embedder_argument={embedder_argument!r} needs an embedder "
                "(embedder: ${embedder})"
            )
        args[embedder_argument] = embeddings_for(framework, embedder, cache)
    try:
        return fn(**args)
    except Exception as exc:
        raise ConfigError(f"factory={factory!r} failed: {type(exc).__name__}: {exc}") from exc
