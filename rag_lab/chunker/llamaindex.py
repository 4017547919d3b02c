"""A LlamaIndex node parser as the chunker (``llama-index-core``):

    chunker=llamaindex chunker.splitter=llama_index.core.node_parser.SentenceSplitter

Each document becomes a LlamaIndex ``Document`` (no metadata: a parser that budgets metadata
into its chunk size sees none) and goes through ``get_nodes_from_documents``; each node's span is
its ``start_char_idx`` / ``end_char_idx`` where they hold its text, else its text is located in
the document (``rag_lab.chunker._adapter.locate``). Chunk ids, provenance and section metadata
are rag_lab's. ``SentenceSplitter`` counts ``chunk_size`` in tokens of its tokenizer (tiktoken's
``cl100k_base``, shipped inside llama-index-core: no download).
"""

from __future__ import annotations

from collections.abc import Iterable

from rag_lab.chunker._adapter import AdapterChunker, locate
from rag_lab.types import Document


class LlamaIndexChunker(AdapterChunker):
    """Args:
    splitter: import path of a ``llama_index.core.node_parser`` class (``SentenceSplitter``,
        ``TokenTextSplitter``, ``MarkdownNodeParser``...) or a callable returning one.
    kwargs: its constructor arguments (``chunk_size``, ``chunk_overlap``...).
    allow_imports: package prefixes outside the allow-list that ``splitter`` may name (opt-in).
    """

    framework = "llamaindex"
    method = "get_nodes_from_documents"  # what the built splitter must have

    def spans(self, doc: Document) -> Iterable[tuple[int, int]]:
        from llama_index.core.schema import Document as LIDocument

        nodes = self.splitter.get_nodes_from_documents([LIDocument(text=doc.text, id_=doc.doc_id)])
        spans: list[tuple[int, int]] = []
        for node in nodes:
            text = node.get_content()
            s, e = node.start_char_idx, node.end_char_idx
            if s is not None and e is not None and doc.text[s:e] == text:
                spans.append((s, e))
            else:
                spans.extend(locate(doc, [text]))
        return spans
