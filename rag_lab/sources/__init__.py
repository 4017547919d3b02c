"""Named knowledge sources routed per query: the router protocol and its variants (``rules``;
``llm``: rules first, then the model). The sources themselves (a corpus, parser, chunker and
retrievers each) are sub-pipelines built by ``rag_lab.pipeline.build`` and run by
``rag_lab.pipeline.sources``."""

from rag_lab.sources.base import DEFAULT_ROUTE, Routing, SourceRouter
from rag_lab.sources.llm import LLMRouter
from rag_lab.sources.rules import RuleRouter

__all__ = ["DEFAULT_ROUTE", "LLMRouter", "Routing", "RuleRouter", "SourceRouter"]
