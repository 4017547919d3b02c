"""Adapters: LangChain and LlamaIndex components as rag_lab stages, and whole foreign pipelines
evaluated end to end. A leaf package (like ``rag_lab.text``) that the stage variants use:

- ``imports``: the allow-list of import paths an adapter config may name, ``allow_imports``
  (the opt-in), and the package versions that key an adapter's results;
- ``factory``: the one calling convention that builds a component over rag_lab's chunks;
- ``langchain`` / ``llamaindex``: chunks as ``Document``s / ``TextNode``s with
  ``metadata={"doc_id", "chunk_id", ...}``, rag_lab's embedder as the framework's embeddings;
- ``mapping``: returned sources → corpus chunk ids (metadata id, exact text, normalised
  containment; unmapped ones counted);
- ``answers``: where an end-to-end pipeline's answers wait for the answer stage;
- ``examples``: small pipelines built from real components (the tutorial RAG chain).

The variants: ``rag_lab.retrievers.LangChainRetriever``, ``LlamaIndexRetriever``,
``ForeignPipelineRetriever``; ``rag_lab.chunker.LangChainChunker``, ``LlamaIndexChunker``;
``rag_lab.generator.ForeignPipelineGenerator``. Nothing here imports LangChain or LlamaIndex at
import time of ``rag_lab.adapters``.
"""
