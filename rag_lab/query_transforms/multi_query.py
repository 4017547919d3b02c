"""Multi-query rewriting: an LLM writes ``n`` other phrasings of each query; every retriever runs
the query and each phrasing, and the pipeline fuses one query's lists by reciprocal rank
(``QueryVariants``) before fusion across retrievers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_lab.errors import ConfigError
from rag_lab.query_transforms._helper import LLMStage, messages, nonempty_lines
from rag_lab.text.language import detect_language

PROMPTS: dict[str, tuple[str, str]] = {
    "en": (
        "You rewrite search queries for a technical maintenance knowledge base. Keep fault "
        "codes, model numbers and part numbers exactly as written.",
        "Write {n} different search queries that ask for the same information as the query "
        "below, one per line, without numbering or explanation.\n\nQuery: {query}",
    ),
    "zh": (
        "你负责为设备维修知识库改写检索查询。故障码、型号和零件号必须与原文一致。",
        "请写出 {n} 条与下面查询意思相同、措辞不同的检索查询，每行一条，不要编号或解释。"
        "\n\n查询：{query}",
    ),
}


class MultiQueryTransform(LLMStage):
    """Args:
    generator: an LLM generator (``openai``, ``transformers``); its model and decoding
        settings write the rewrites (``${generator}`` in the shipped config).
    n: rewrites per query (at most; the model may write fewer, repeats are dropped).
    include_query: each retriever also runs the query's own text (first in the fusion).
    max_tokens: cap on the model's reply.
    retrievers: the retrievers that run the rewrites (empty: all of them).
    """

    name = "multi_query"

    def __init__(
        self,
        generator: Any,
        n: int = 3,
        include_query: bool = True,
        max_tokens: int = 128,
        retrievers: list[str] | None = None,
    ) -> None:
        super().__init__(generator, max_tokens, "multi_query")
        if int(n) < 1:
            raise ConfigError(f"query_transforms.multi_query.n must be >= 1, got {n}")
        self.n, self.include_query = int(n), bool(include_query)
        self.retrievers = tuple(retrievers or ())

    def rewrites(self, query: str) -> list[str]:
        """Up to ``n`` distinct rewrites of ``query`` (never ``query`` itself)."""
        system, user = PROMPTS[detect_language(query)]
        reply = self.ask(messages(system, user.format(n=self.n, query=query)))
        out: list[str] = []
        for line in nonempty_lines(reply):
            if line != query and line not in out:
                out.append(line)
        return out[: self.n]

    def transform(self, queries: Mapping[str, str]) -> dict[str, str]:
        return dict(queries)

    def variants(self, queries: Mapping[str, str], retriever: str) -> dict[str, list[str]]:
        if self.retrievers and retriever not in self.retrievers:
            return {}
        self.saw(queries)
        return {
            qid: ([text] if self.include_query else []) + self.rewrites(text) or [text]
            for qid, text in queries.items()
        }
