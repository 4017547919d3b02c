"""A whole foreign RAG pipeline (a LangChain runnable, a LlamaIndex query engine) evaluated end to
end: rag_lab sends each query, reads back the answer and the source documents it used, maps the
sources onto the corpus' chunk ids (``rag_lab.adapters.mapping``: metadata id, else exact text,
else normalised containment; failures counted, never dropped) and scores them as a native run.
The answer goes to the answer stage through ``generator=foreign_pipeline``
(``rag_lab.generator.ForeignPipelineGenerator``), so faithfulness, answer metrics and miss
reasons are computed exactly as for a native pipeline, against the mapped source chunks.

What it expects back:

- LangChain (``framework: langchain``): ``runnable.invoke(query)`` (or ``{input_key: query}``)
  returns a mapping with the answer under ``answer_key`` (a string or a message) and the sources
  under ``sources_key`` (a list of ``Document``s); a bare string or message is an answer with no
  sources (counted: ``queries_without_sources``).
- LlamaIndex (``framework: llamaindex``): ``engine.query(query)`` returns a ``Response``:
  ``response`` is the answer, ``source_nodes`` the sources.

The pipeline is built by ``factory`` as every adapter's component (``rag_lab.adapters.factory``):
given the corpus (``corpus_argument``) and rag_lab's embedder (``embedder_argument``) when it is
built over them, or nothing when it is your deployed pipeline over its own index (its sources are
then mapped by text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.adapters.answers import publish
from rag_lab.adapters.mapping import Source
from rag_lab.errors import ConfigError
from rag_lab.retrievers._adapter import AdapterRetriever
from rag_lab.types import Run
from rag_lab.validate import choice


def _text(value: Any) -> str:
    """An answer as text: a string, a message's ``content``, else ``str``."""
    if isinstance(value, str):
        return value
    content = getattr(value, "content", None)
    return content if isinstance(content, str) else str(value)


class ForeignPipelineRetriever(AdapterRetriever):
    """Args:
    framework: ``langchain`` (a runnable) or ``llamaindex`` (a query engine).
    factory: import path of the callable that builds the pipeline.
    kwargs: its other arguments.
    corpus_argument: the argument given the chunks (``Document``s / ``TextNode``s); null: none.
    embedder, embedder_argument: rag_lab's embedder, wrapped for the framework, and the argument
        that gets it (null: none).
    input_key: null: ``invoke(query)``; else ``invoke({input_key: query})`` (LangChain).
    answer_key, sources_key: where the answer and the source documents are in the output mapping.
    answers_as: the board the answers are published on (``generator.board`` reads it).
    content, allow_imports: as for every adapter (``rag_lab.retrievers._adapter``).
    """

    def __init__(
        self,
        factory: str,
        framework: str = "langchain",
        kwargs: Mapping[str, Any] | None = None,
        corpus_argument: str | None = None,
        embedder: Any | None = None,
        embedder_argument: str | None = None,
        input_key: str | None = None,
        answer_key: str = "answer",
        sources_key: str = "source_documents",
        answers_as: str = "foreign_pipeline",
        content: str = "index_text",
        allow_imports: Sequence[str] = (),
    ) -> None:
        self.framework = choice(framework, "framework", ("langchain", "llamaindex"))
        super().__init__(
            factory, kwargs, corpus_argument, embedder, embedder_argument, content, allow_imports
        )
        self.input_key = input_key
        self.answer_key, self.sources_key = str(answer_key), str(sources_key)
        self.answers_as = str(answers_as)

    def recipe(self) -> dict[str, Any]:
        return {
            **super().recipe(),
            "input_key": self.input_key,
            "answer_key": self.answer_key,
            "sources_key": self.sources_key,
        }

    def output(self, component: Any, query: str, k: int) -> dict[str, Any]:
        if self.framework == "llamaindex":
            from rag_lab.adapters.llamaindex import to_source as li_source

            response = component.query(query)
            return {
                "answer": _text(getattr(response, "response", response)),
                "sources": [li_source(n) for n in getattr(response, "source_nodes", None) or []],
            }
        from rag_lab.adapters.langchain import to_source as lc_source

        out = component.invoke(query if self.input_key is None else {self.input_key: query})
        if not isinstance(out, Mapping):
            return {"answer": _text(out), "sources": []}
        if self.answer_key not in out:
            raise ConfigError(
                f"factory={self.factory!r}: the output has no {self.answer_key!r} "
                f"(keys: {', '.join(map(str, out))}; set answer_key)"
            )
        raw = out.get(self.sources_key)
        if raw is None:
            raise ConfigError(
                f"factory={self.factory!r}: the output has no {self.sources_key!r} "
                f"(keys: {', '.join(map(str, out))}; set sources_key)"
            )
        return {"answer": _text(out[self.answer_key]), "sources": [lc_source(d) for d in raw]}

    def sources(self, component: Any, query: str, k: int) -> list[Source]:
        return list(self.output(component, query, k)["sources"])

    def retrieve(self, queries: Mapping[str, str], k: int) -> Run:
        run = super().retrieve(queries, k)
        for qid, text in queries.items():
            entry = self.outputs[qid]
            publish(self.answers_as, text, str(entry.get("answer", "")), entry["ids"])
        self.stats["queries_without_sources"] = float(
            sum(1 for rows in self.mapped.values() if not rows)
        )
        return run
