"""LLM follow-up resolution: the model reads the conversation's earlier user turns and rewrites the
follow-up as a standalone search query (``metadata.history``, handed over by the pipeline:
``rag_lab.protocols.QueryMetadataAware``; a query without history is unchanged and costs no
call)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.query_transforms._helper import LLMStage, messages, nonempty_lines
from rag_lab.text.language import detect_language

PROMPTS: dict[str, tuple[str, str]] = {
    "en": (
        "You rewrite follow-up questions about equipment maintenance into standalone search "
        "queries. Keep fault codes, model numbers and part numbers exactly as written.",
        "Earlier questions:\n{history}\n\nFollow-up: {query}\n\nRewrite the follow-up as one "
        "standalone search query that names what it refers to. Reply with the query only.",
    ),
    "zh": (
        "你负责把设备维修对话中的追问改写成可以单独检索的查询。故障码、型号和零件号必须与原文一致。",
        "之前的问题：\n{history}\n\n追问：{query}\n\n请把追问改写成一条能单独检索的查询，写明它指代的"
        "设备或故障。只回答改写后的查询。",
    ),
}


class LLMHistoryRewrite(LLMStage):
    """Args:
    generator: an LLM generator (``openai``, ``transformers``).
    max_turns: at most this many earlier turns go into the prompt (the latest ones).
    max_tokens: cap on the reply; its first non-empty line is the rewrite (blank: unchanged).
    """

    name = "llm_history"
    query_metadata_fields = ("history",)

    def __init__(self, generator: Any, max_turns: int = 4, max_tokens: int = 64) -> None:
        super().__init__(generator, max_tokens, "llm_history")
        self.max_turns = max(int(max_turns), 1)
        self._history: dict[str, list[str]] = {}

    def rewrite(self, text: str, history: Sequence[str]) -> str:
        if not history:
            return text
        system, user = PROMPTS[detect_language(text)]
        turns = "\n".join(f"- {t}" for t in list(history)[-self.max_turns :])
        reply = self.ask(messages(system, user.format(history=turns, query=text)))
        lines = nonempty_lines(reply)
        return lines[0] if lines else text

    def set_query_metadata(self, metadata: Mapping[str, Mapping[str, Any]]) -> None:
        """``QueryMetadataAware``: each query's ``history`` (previous user turns, oldest first)."""
        self._history = {q: [str(t) for t in m.get("history") or ()] for q, m in metadata.items()}

    def transform(self, queries: Mapping[str, str]) -> dict[str, str]:
        history = self._history
        self.saw(queries)
        return {qid: self.rewrite(text, history.get(qid, ())) for qid, text in queries.items()}
