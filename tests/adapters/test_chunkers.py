"""chunker=langchain (RecursiveCharacterTextSplitter) and chunker=llamaindex (SentenceSplitter):
the foreign splitter's own pieces, as rag_lab chunks that keep the chunker contract."""

from __future__ import annotations

import pytest

from rag_lab.chunker import LangChainChunker, LlamaIndexChunker
from rag_lab.errors import ConfigError
from rag_lab.pipeline.build import instantiate
from rag_lab.types import Document


@pytest.fixture(scope="module")
def documents(sample_chunks):
    """The sample's documents rebuilt from whole-document chunks (chunker=none)."""
    from rag_lab.chunker import NoneChunker

    data, chunks = sample_chunks
    by_doc: dict[str, list] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    docs = []
    for doc_id, cs in by_doc.items():
        size = max(c.end for c in cs)
        buf = [" "] * size
        for c in cs:
            buf[c.start : c.end] = c.text
        docs.append(Document(doc_id, "".join(buf), cs[0].title))
    assert NoneChunker().chunk(docs)  # real, non-empty documents
    return docs


def _check_contract(docs, chunks):
    by_id = {d.doc_id: d for d in docs}
    for c in chunks:
        assert c.text == by_id[c.doc_id].text[c.start : c.end]
    for d in docs:
        ids = [c.chunk_id for c in chunks if c.doc_id == d.doc_id]
        assert ids == [f"{d.doc_id}#{i}" for i in range(len(ids))]


def test_langchain_splitter_pieces_become_chunks(documents):
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    node = {
        "_target_": "rag_lab.chunker.LangChainChunker",
        "splitter": "langchain_text_splitters.RecursiveCharacterTextSplitter",
        "kwargs": {"chunk_size": 512, "chunk_overlap": 64},
    }
    chunker = instantiate(node, "chunker")
    chunks = chunker.chunk(documents)
    _check_contract(documents, chunks)
    # exactly the splitter's own pieces, in order (rag_lab only locates them)
    direct = RecursiveCharacterTextSplitter(chunk_size=512, chunk_overlap=64)
    want = [p.strip() for d in documents for p in direct.split_text(d.text) if p.strip()]
    assert [c.text for c in chunks] == want
    assert max(len(c.text) for c in chunks) <= 512
    assert len(chunks) > len(documents)  # the sample's long manuals are split


def test_llamaindex_node_parser_spans_become_chunks(documents):
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.schema import Document as LIDocument

    chunker = LlamaIndexChunker(
        "llama_index.core.node_parser.SentenceSplitter", {"chunk_size": 128, "chunk_overlap": 0}
    )
    chunks = chunker.chunk(documents)
    _check_contract(documents, chunks)
    direct = SentenceSplitter(chunk_size=128, chunk_overlap=0)
    nodes = direct.get_nodes_from_documents([LIDocument(text=d.text) for d in documents])
    assert [c.text for c in chunks] == [n.get_content().strip() for n in nodes]
    assert chunker.identity["packages"]["llama-index-core"]


def test_a_splitter_that_rewrites_text_is_refused():
    chunker = LangChainChunker(
        "langchain_text_splitters.MarkdownTextSplitter", {"chunk_size": 40, "chunk_overlap": 0}
    )
    doc = Document("d", "# Title\n\nbody " * 3)
    assert chunker.chunk([doc])  # a splitter that keeps the text works
    chunker.splitter.split_text = lambda text: ["BODY"]  # and one that rewrites it does not
    with pytest.raises(ConfigError, match="not in its text"):
        chunker.chunk([doc])


def test_the_splitter_is_behind_the_allow_list_and_its_arguments_checked():
    def build(**args):
        return instantiate({"_target_": "rag_lab.chunker.LangChainChunker", **args}, "chunker")

    with pytest.raises(ConfigError, match=r"^chunker.splitter='os.path.join': not allowed"):
        build(splitter="os.path.join")
    with pytest.raises(ConfigError, match="^chunker.splitter=.*which has no split_text"):
        build(splitter="langchain_core.documents.Document", kwargs={"page_content": "x"})
    with pytest.raises(ConfigError, match="^chunker.kwargs=.*chunk_size must be > 0"):
        build(
            splitter="langchain_text_splitters.RecursiveCharacterTextSplitter",
            kwargs={"chunk_size": -1},
        )
