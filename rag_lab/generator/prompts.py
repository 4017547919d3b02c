"""Prompt templates (Chinese and English).

Contract for every generator: answer only from the context; when the context does not contain the
answer, reply with exactly ``REFUSALS[language]`` (``rag_lab.text.refusals``), which
``is_refusal`` and the judges recognise.
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_lab.text.refusals import REFUSALS


@dataclass(frozen=True)
class PromptTemplate:
    """A system instruction and a user message with ``{context}`` and ``{question}`` slots."""

    system: str
    user: str

    def messages(self, question: str, context: str) -> list[dict[str, str]]:
        """Chat messages (OpenAI / HF chat-template shape)."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user.format(context=context, question=question)},
        ]


PROMPTS: dict[str, PromptTemplate] = {
    "en": PromptTemplate(
        system=(
            "You answer questions about technical documentation. Use only the numbered "
            "context passages; do not use outside knowledge. Quote numbers, units, fault codes "
            "and clause numbers exactly as written. Cite the passages you use as [1], [2]. If "
            f"the context does not contain the answer, reply exactly: {REFUSALS['en']}"
        ),
        user="Context:\n{context}\n\nQuestion: {question}\nAnswer:",
    ),
    "zh": PromptTemplate(
        system=(
            "你负责回答技术文档相关的问题。只能依据下面编号的资料作答，不得使用资料以外的知识。"
            "数字、单位、故障码和条款编号必须与资料原文一致。用 [1]、[2] 标注所依据的资料。"
            f"如果资料中没有答案，只回答：{REFUSALS['zh']}"
        ),
        user="资料：\n{context}\n\n问题：{question}\n回答：",
    ),
}
