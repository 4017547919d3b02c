"""HyDE (Gao et al., 2022): an LLM writes a hypothetical passage that answers the query, and the
dense retriever searches with that passage (a document-like text lands nearer the documents in
embedding space than a short question does). Keyword retrievers keep the query by default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_lab.query_transforms._helper import LLMStage, messages
from rag_lab.text.language import detect_language

PROMPTS: dict[str, tuple[str, str]] = {
    "en": (
        "You write passages of technical maintenance manuals.",
        "Write a short passage (2-3 sentences) from an equipment maintenance manual that answers "
        "the question. Keep fault codes and model numbers exactly as written.\n\n"
        "Question: {query}\nPassage:",
    ),
    "zh": (
        "你负责撰写设备维修手册的段落。",
        "请写一段（2-3 句）设备维修手册中能回答下面问题的文字。故障码和型号必须与原文一致。"
        "\n\n问题：{query}\n段落：",
    ),
}


class HydeTransform(LLMStage):
    """Args:
        generator: an LLM generator (``openai``, ``transformers``).
        retrievers: the retrievers that search with the passage (default ``[dense]``; empty: all).
        include_query: those retrievers also run the query itself, fused with the passage's list
            by reciprocal rank; ``false`` is the paper's HyDE (the passage alone).
        max_tokens: cap on the passage's length.

    A blank reply leaves the query as it is.
    """

    name = "hyde"

    def __init__(
        self,
        generator: Any,
        retrievers: list[str] | None = None,
        include_query: bool = False,
        max_tokens: int = 128,
    ) -> None:
        super().__init__(generator, max_tokens, "hyde")
        self.retrievers = tuple(["dense"] if retrievers is None else retrievers)
        self.include_query = bool(include_query)

    def passage(self, query: str) -> str:
        system, user = PROMPTS[detect_language(query)]
        return " ".join(self.ask(messages(system, user.format(query=query))).split())

    def transform(self, queries: Mapping[str, str]) -> dict[str, str]:
        return dict(queries)

    def variants(self, queries: Mapping[str, str], retriever: str) -> dict[str, list[str]]:
        if self.retrievers and retriever not in self.retrievers:
            return {}
        self.saw(queries)
        out = {}
        for qid, text in queries.items():
            passage = self.passage(text)
            out[qid] = ([text] if self.include_query or not passage else []) + (
                [passage] if passage and passage != text else []
            )
        return out
