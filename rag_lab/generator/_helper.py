"""What the model-backed generators (``openai``, ``transformers``) share: the prompt, the refusal
without chunks, and the request description the answer stage caches under."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_lab.generator.context import build_context
from rag_lab.generator.prompts import PROMPTS
from rag_lab.text.language import detect_language
from rag_lab.text.refusals import REFUSALS
from rag_lab.types import Chunk


def check_language(language: str | None) -> str | None:
    if language is not None and language not in PROMPTS:
        raise ValueError(f"language must be one of {sorted(PROMPTS)} or null, got {language!r}")
    return language


class PromptedGenerator:
    """Base of the model-backed generators. The prompt is ``PROMPTS[language]`` (``language``, or
    the query's) around ``build_context``'s blocks under ``max_context_tokens``. No chunks → the
    refusal string, without a model call. Subclasses implement ``complete(messages)`` (the model
    call) and ``settings()`` (model identity and decoding settings: with the messages, everything
    that determines the answer)."""

    max_context_tokens: int
    language: str | None

    def complete(self, messages: list[dict[str, str]]) -> str:
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        raise NotImplementedError

    def language_of(self, query: str) -> str:
        return self.language or detect_language(query)

    def messages(
        self, query: str, chunks: Sequence[Chunk], notes: Sequence[str] = ()
    ) -> list[dict[str, str]]:
        language = self.language_of(query)
        context, _ = build_context(chunks, self.max_context_tokens, language, notes)
        return PROMPTS[language].messages(query, context)

    def request(
        self, query: str, chunks: Sequence[Chunk], notes: Sequence[str] = ()
    ) -> dict[str, Any] | None:
        """Everything that determines the answer (``Cacheable``; None: answered without a
        model call)."""
        if not chunks:
            return None
        return {**self.settings(), "messages": self.messages(query, chunks, notes)}

    def generate(self, query: str, chunks: Sequence[Chunk], notes: Sequence[str] = ()) -> str:
        if not chunks:
            return REFUSALS[self.language_of(query)]
        return self.complete(self.messages(query, chunks, notes)).strip()
