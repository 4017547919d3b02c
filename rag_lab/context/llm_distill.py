"""LLM distillation: the generator's model condenses the top chunks into a few cited facts
before the answer prompt.

The model reads the chunks as the numbered context (``build_context``) and lists facts, one per
line, each ending with the number of its passage (``<fact> [2]``: the prompt shows the format
only, no example fact, since SmolLM2-135M copied an example's value into its facts). The facts
are grouped under their cited chunk, one line each (the marker removed), so the answer prompt's
block ``[n]`` still cites the source; a line without a valid ``[n]`` is dropped (``uncited``). A
reply with no cited fact returns the chunks unchanged (``kept_all``).

Cache: namespace ``generations`` (``CacheAware``), key ``generation_key`` of the stage name, the
generator's settings (its model, decoding settings and reply cap) and the messages, like the LLM
query transforms; a rerun makes no call.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rag_lab.cache import keys
from rag_lab.errors import ConfigError
from rag_lab.generator._helper import PromptedGenerator
from rag_lab.generator.context import build_context
from rag_lab.text.language import detect_language
from rag_lab.types import Chunk
from rag_lab.validate import integer

if TYPE_CHECKING:
    from rag_lab.cache import CacheView

PROMPTS: dict[str, tuple[str, str]] = {
    "en": (
        "You extract facts from technical documentation. Use only the numbered passages.",
        "List at most {n} short facts from the passages that help answer the question, one per "
        "line, each ending with the number of its passage in brackets: <fact> [<passage "
        "number>]. Copy numbers, units and codes exactly. If no passage helps, reply NONE."
        "\n\nPassages:\n{context}\n\nQuestion: {query}\nFacts:",
    ),
    "zh": (
        "你负责从技术文档中提取事实。只能依据编号的资料。",
        "列出资料中有助于回答问题的事实，最多 {n} 条，每行一条，行末用方括号标注资料编号，"
        "格式：<事实> [<资料编号>]。数字、单位和代码必须与原文一致。若资料都无帮助，只回答 "
        "NONE。\n\n资料：\n{context}\n\n问题：{query}\n事实：",
    ),
}

_CITE = re.compile(r"\s*[\[【](\d+)[\]】]\s*")
_LEAD = re.compile(r"^\s*(?:[-*•]|\d+[.)、])\s*")


def parse_facts(reply: str, n_chunks: int) -> tuple[dict[int, list[str]], int]:
    """``({chunk index: [facts]}, uncited lines)`` of a reply; a fact citing several passages
    goes under each."""
    facts: dict[int, list[str]] = {}
    uncited = 0
    for line in reply.splitlines():
        line = _LEAD.sub("", line).strip()
        if not line or line.upper() == "NONE":
            continue
        cited = [int(m) - 1 for m in _CITE.findall(line)]
        text = _CITE.sub(" ", line).strip()
        valid = [i for i in cited if 0 <= i < n_chunks]
        if not text or not valid:
            uncited += 1
            continue
        for i in dict.fromkeys(valid):
            facts.setdefault(i, []).append(text)
    return facts, uncited


class LLMDistiller:
    """Args:
        generator: an LLM generator (``openai``, ``transformers``; ``${generator}`` by default).
        max_facts: at most this many facts asked for.
        max_context_tokens: budget of the passages shown to the model (pre-tokens).

    ``stats``: ``llm_calls``, ``llm_cache_hits``, ``llm_ms``, ``uncited``, ``kept_all``."""

    cache_namespace = "generations"

    def __init__(
        self,
        generator: Any,
        max_facts: int = 5,
        max_context_tokens: int = 1500,
    ) -> None:
        if not isinstance(generator, PromptedGenerator):
            raise ConfigError(
                "context.llm_distill.generator: "
                + (
                    "none configured (set generator=openai or generator=transformers)"
                    if generator is None
                    else f"{type(generator).__name__} writes no text of its own; use an LLM "
                    "generator (openai, transformers)"
                )
            )
        self.generator = generator
        self.max_facts = integer(max_facts, "max_facts", ge=1)
        self.max_context_tokens = integer(max_context_tokens, "max_context_tokens", ge=1)
        self._cache: CacheView | None = None
        self.stats: dict[str, float] = dict.fromkeys(
            ("llm_calls", "llm_cache_hits", "llm_ms", "uncited", "kept_all"), 0.0
        )

    def attach_cache(self, view: CacheView) -> None:
        self._cache = view

    def _ask(self, messages: list[dict[str, str]]) -> str:
        request = {
            "stage": "context/llm_distill",
            "generator": self.generator.settings(),
            "messages": messages,
        }
        key = keys.generation_key(request)
        cached = self._cache.get_json(key) if self._cache is not None else None
        if isinstance(cached, dict) and isinstance(cached.get("text"), str):
            self.stats["llm_cache_hits"] += 1
            return str(cached["text"])
        t0 = time.perf_counter()
        text = self.generator.complete(messages)
        self.stats["llm_ms"] += (time.perf_counter() - t0) * 1000
        self.stats["llm_calls"] += 1
        if self._cache is not None:
            self._cache.put_json(key, {"text": text})
        return text

    def apply(self, query: str, chunks: Sequence[Chunk]) -> list[Chunk]:
        if not chunks:
            return []
        language = detect_language(query)
        context, shown = build_context(chunks, self.max_context_tokens, language)
        system, user = PROMPTS[language]
        messages = [
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": user.format(n=self.max_facts, context=context, query=query),
            },
        ]
        facts, uncited = parse_facts(self._ask(messages), len(shown))
        self.stats["uncited"] += uncited
        if not facts:
            self.stats["kept_all"] += 1
            return list(chunks)
        return [dataclasses.replace(shown[i], text="\n".join(facts[i])) for i in sorted(facts)]
