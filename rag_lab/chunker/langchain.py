"""A LangChain text splitter as the chunker (``langchain-text-splitters``):

    chunker=langchain chunker.splitter=langchain_text_splitters.RecursiveCharacterTextSplitter

Each document's text goes through ``splitter.split_text``; every piece is located in the text
(``rag_lab.chunker._adapter.locate``), so chunks keep rag_lab's provenance, section metadata and
ids (``<doc_id>#<i>``) exactly as a native chunker's. Sizes are the splitter's own
(``chunk_size`` in characters for ``RecursiveCharacterTextSplitter``, with its default
``length_function=len``).
"""

from __future__ import annotations

from collections.abc import Iterable

from rag_lab.chunker._adapter import AdapterChunker, locate
from rag_lab.types import Document


class LangChainChunker(AdapterChunker):
    """Args:
    splitter: import path of a ``langchain_text_splitters.TextSplitter`` class (or a callable
        returning one).
    kwargs: its constructor arguments (``chunk_size``, ``chunk_overlap``, ``separators``...).
    allow_imports: package prefixes outside the allow-list that ``splitter`` may name (opt-in).
    """

    framework = "langchain"
    method = "split_text"  # what the built splitter must have

    def spans(self, doc: Document) -> Iterable[tuple[int, int]]:
        return locate(doc, self.splitter.split_text(doc.text))
