"""What the LLM-backed query transforms share: one chat call through an existing generator, cached
in the stage cache and counted.

The generators are ``rag_lab.generator``'s model-backed ones (``openai``, ``transformers``): a
transform sends its own messages through the generator's model with the generator's decoding
settings. The extractive generator writes no text of its own (it quotes retrieved chunks, and a
query transform runs before anything is retrieved), so it is refused with a one-line error.

Cache: namespace ``generations``, key ``rag_lab.cache.keys.generation_key`` of the generator's
identity and decoding settings (``settings()``), the transform's name and its messages (prompt
template filled with the query and history) — so a changed prompt, model or query misses, and a
rerun makes no call.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rag_lab.cache import keys
from rag_lab.errors import ConfigError
from rag_lab.generator._helper import PromptedGenerator
from rag_lab.generator.openai import OpenAIGenerator
from rag_lab.generator.transformers import TransformersGenerator

if TYPE_CHECKING:
    from rag_lab.cache import CacheView

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Reply:
    text: str
    prompt_tokens: int
    completion_tokens: int


def check_generator(generator: Any, where: str) -> PromptedGenerator:
    if generator is None:
        raise ConfigError(
            f"query_transforms.{where}.generator: none configured (set generator=openai or "
            "generator=transformers with its model, or give the transform its own generator)"
        )
    if not isinstance(generator, PromptedGenerator):
        raise ConfigError(
            f"query_transforms.{where}.generator: {type(generator).__name__} writes no text of its "
            "own (it quotes retrieved chunks); use an LLM generator (openai, transformers)"
        )
    return generator


def _call(generator: PromptedGenerator, messages: Messages, max_tokens: int) -> Reply:
    """One completion with the generator's model and decoding settings; tokens as the model
    counted them (0 where a generator does not say)."""
    if isinstance(generator, TransformersGenerator):
        out = generator.chat(messages, max_new_tokens=max_tokens)
        return Reply(out.text, out.prompt_tokens, out.completion_tokens)
    if isinstance(generator, OpenAIGenerator):
        raw = generator.client.complete(
            messages, temperature=generator.temperature, max_tokens=max_tokens
        )
        usage = raw.get("usage") or {}
        return Reply(
            str(raw["content"]),
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
        )
    return Reply(generator.complete(messages), 0, 0)


_LEAD = re.compile(r"^\s*(?:[-*•]|\d+[.)、:]|(?:query|question|查询|问题)\s*[:：])\s*", re.I)


def clean_line(text: str) -> str:
    """A model's line without list markers, a ``Query:`` label or surrounding quotes."""
    line = _LEAD.sub("", text.strip())
    return line.strip().strip("\"'“”「」").strip()


class LLMStage:
    """Base of the LLM-backed transforms: ``ask(messages)`` returns the model's text, read from the
    stage cache when the same generator saw the same messages (``CacheAware``: namespace
    ``generations``), and from an in-process memo within a run. ``stats`` (``Measured``):
    ``llm_calls``, ``llm_cache_hits``, ``prompt_tokens``, ``completion_tokens``, ``llm_ms`` and
    the same per query (``*_per_query``, over the distinct query texts the stage was given, also
    those that needed no call: a first turn for a history rewrite)."""

    cache_namespace = "generations"
    name = "llm"

    def __init__(self, generator: Any, max_tokens: int, where: str) -> None:
        self.generator = check_generator(generator, where)
        if int(max_tokens) < 1:
            raise ConfigError(f"query_transforms.{where}.max_tokens must be >= 1, got {max_tokens}")
        self.max_tokens = int(max_tokens)
        self._cache: CacheView | None = None
        self._memo: dict[str, str] = {}
        self._queries: set[str] = set()
        self._counts = {
            "llm_calls": 0.0,
            "llm_cache_hits": 0.0,
            "prompt_tokens": 0.0,
            "completion_tokens": 0.0,
            "llm_ms": 0.0,
        }

    def attach_cache(self, view: CacheView) -> None:
        self._cache = view

    @property
    def stats(self) -> dict[str, float]:
        n = max(len(self._queries), 1)
        c = self._counts
        return {
            **c,
            "n_queries": float(len(self._queries)),
            "llm_calls_per_query": c["llm_calls"] / n,
            "tokens_per_query": (c["prompt_tokens"] + c["completion_tokens"]) / n,
            "llm_ms_per_query": c["llm_ms"] / n,
        }

    def saw(self, queries: Mapping[str, str]) -> None:
        """Count ``queries`` (by text) in the per-query denominators, asked for or not."""
        self._queries.update(queries.values())

    def ask(self, messages: Messages) -> str:
        request = {
            "stage": f"query_transforms/{self.name}",
            "generator": self.generator.settings(),
            "max_tokens": self.max_tokens,
            "messages": messages,
        }
        key = keys.generation_key(request)
        if key in self._memo:
            return self._memo[key]
        cached = self._cache.get_json(key) if self._cache is not None else None
        if isinstance(cached, dict) and isinstance(cached.get("text"), str):
            self._counts["llm_cache_hits"] += 1
            text = str(cached["text"])
        else:
            t0 = time.perf_counter()
            reply = _call(self.generator, messages, self.max_tokens)
            self._counts["llm_ms"] += (time.perf_counter() - t0) * 1000
            self._counts["llm_calls"] += 1
            self._counts["prompt_tokens"] += reply.prompt_tokens
            self._counts["completion_tokens"] += reply.completion_tokens
            text = reply.text
            if self._cache is not None:
                self._cache.put_json(
                    key,
                    {
                        "text": text,
                        "prompt_tokens": reply.prompt_tokens,
                        "completion_tokens": reply.completion_tokens,
                    },
                )
        self._memo[key] = text
        return text


def messages(system: str, user: str) -> Messages:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def nonempty_lines(text: str) -> Sequence[str]:
    return [c for c in (clean_line(line) for line in text.splitlines()) if c]
