"""Foreign pipelines the adapter tests name by import path (``tests.adapters.foreign.*``, opted in
with ``allow_imports: [tests.adapters]``): real LangChain components around a source that no
corpus chunk holds, and one that holds a chunk's text in another spelling."""

from __future__ import annotations

from typing import Any

STRAY = "This sentence is in no document of the corpus: a hallucinated citation."


def chain_with_stray_sources(documents: list[Any], embedding: Any, k: int = 3) -> Any:
    """The tutorial chain (InMemoryVectorStore top-``k``), plus two sources after its own: the
    first source's text upper-cased with its metadata dropped (maps by normalised text) and
    ``STRAY`` (maps to nothing)."""
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda

    from rag_lab.adapters.examples import tutorial_chain

    inner = tutorial_chain(documents, embedding, k=k)

    def add(out: dict[str, Any]) -> dict[str, Any]:
        first = out["source_documents"][0]
        extra = [
            Document(page_content="  " + first.page_content.upper().replace(" ", "\n ") + " "),
            Document(page_content=STRAY, metadata={"source": "nowhere.md"}),
        ]
        return {**out, "source_documents": [*out["source_documents"], *extra]}

    return inner | RunnableLambda(add)


def answer_only(documents: list[Any] | None = None) -> Any:
    """A runnable that answers without citing anything (a bare string out)."""
    from langchain_core.runnables import RunnableLambda

    return RunnableLambda(lambda q: f"no idea about {q}")
