"""Generator for any OpenAI-compatible chat-completions endpoint: vLLM, Ollama, llama.cpp server,
``python -m rag_lab.cli llm-server`` (a local transformers model), or OpenAI itself.

The prompt is ``PROMPTS[language]`` (Chinese or English, from the query unless ``language`` is
set) around ``build_context``'s numbered, source-tagged blocks. The API key is read from the
environment variable named by ``api_key_env`` when a request is made (``rag_lab.llm.client``): the
config, and so the MLflow params, hold only the variable's name.
"""

from __future__ import annotations

from typing import Any

from rag_lab.generator._helper import PromptedGenerator, check_language
from rag_lab.llm.client import ChatClient


class OpenAIGenerator(PromptedGenerator):
    """Args:
        base_url: API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: model name the server knows (``/v1/models`` lists them).
        temperature: 0 = greedy (the default: answers are reproducible and cacheable).
        max_tokens: cap on the answer's length in model tokens.
        timeout: seconds per request; retries / backoff: see ``ChatClient``.
        api_key_env: name of the environment variable holding the key (unset: no key sent).
        max_context_tokens: budget of the context in pre-tokens (``build_context``).
        language: ``"zh"`` | ``"en"`` forces the prompt language; None = the query's.

    No chunks → the refusal string, without a request. An endpoint that cannot be used after the
    retries raises ``EndpointError`` naming the URL. ``request(query, chunks)`` is the exact
    request body (minus the key), which the answer stage uses as the cache key.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        temperature: float = 0.0,
        max_tokens: int = 256,
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 1.0,
        api_key_env: str | None = "OPENAI_API_KEY",
        max_context_tokens: int = 1500,
        language: str | None = None,
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.language = check_language(language)
        self.client = ChatClient(
            base_url, model, timeout, retries, backoff, api_key_env, where="generator"
        )
        self.temperature, self.max_tokens = float(temperature), int(max_tokens)
        self.max_context_tokens = int(max_context_tokens)

    def __repr__(self) -> str:
        return f"OpenAIGenerator({self.client!r})"

    def settings(self) -> dict[str, Any]:
        return {
            "kind": "openai",
            "url": self.client.url,
            "model": self.client.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }

    def complete(self, messages: list[dict[str, str]]) -> str:
        out = self.client.complete(
            messages, temperature=self.temperature, max_tokens=self.max_tokens
        )
        return str(out["content"])
