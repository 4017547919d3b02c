"""LLM-judged faithfulness with ragas, through any OpenAI-compatible endpoint.

Per response: ragas ``Faithfulness`` (the LLM splits the response into statements, then decides
for each whether the contexts support it; score = supported / statements). With a reference
answer, also ``LLMContextPrecisionWithReference`` and ``LLMContextRecall`` (in ``details``), which
judge the retrieved contexts, not the response.

Uses ragas' single-turn metrics with its LangChain ``ChatOpenAI`` wrapper (ragas 0.4; its
``collections`` metrics need instructor >= 1, which the project's other pins exclude). Ragas'
prompts are English; a Chinese response is judged through them, so the judge model must read
Chinese. Rules shared with the other judges (before any request; ``details["by_rule"]``): an
empty response is a missing score, a refusal is 1.0, no contexts is 0.0. A failed or unparseable
LLM reply raises; ``JudgeRunner`` retries it and then records a missing score. The judge is only
as good as its LLM: a small local model (SmolLM2-135M) often produces unparseable or arbitrary
verdicts.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from rag_lab.errors import ConfigError
from rag_lab.judge.base import JudgeResult
from rag_lab.llm.client import api_key, check_env_name, redact
from rag_lab.text.refusals import is_refusal


class RagasJudge:
    """Args:
        base_url: the judge LLM's API root, e.g. ``http://127.0.0.1:8001/v1``.
        model: model name at that endpoint.
        api_key_env: name of the environment variable holding the key (unset: a placeholder key
            is sent, which local servers ignore).
        max_tokens: cap per LLM reply (ragas asks for JSON lists of statements and verdicts).
        timeout: seconds for one judge call (all its LLM requests together).
        retries, backoff: used by ``JudgeRunner`` around each call.
        reference_metrics: also score context precision / recall when a reference exists.

    Ragas fixes the sampling temperature itself (near 0).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        max_tokens: int = 1024,
        timeout: float = 180.0,
        retries: int = 2,
        backoff: float = 2.0,
        reference_metrics: bool = True,
    ) -> None:
        if not str(base_url).startswith(("http://", "https://")):
            raise ConfigError(f"judge.base_url must be an http(s) URL, got {base_url!r}")
        if timeout <= 0 or max_tokens < 1:
            raise ConfigError("judge: timeout must be > 0 and max_tokens >= 1")
        self.base_url, self.model = str(base_url).rstrip("/"), str(model)
        self.api_key_env = check_env_name(api_key_env, "judge")
        self.max_tokens, self.timeout = int(max_tokens), float(timeout)
        self.retries, self.backoff = int(retries), float(backoff)
        self.reference_metrics = bool(reference_metrics)
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return (
            f"RagasJudge({self.base_url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"
        )

    @cached_property
    def identity(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "kind": "ragas",
            "ragas": version("ragas"),
            "url": self.base_url,
            "model": self.model,
            "max_tokens": self.max_tokens,
            "reference_metrics": self.reference_metrics,
        }

    @cached_property
    def _metrics(self) -> dict[str, Any]:
        os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")  # ragas posts usage analytics otherwise
        import warnings

        import httpx
        from langchain_openai import ChatOpenAI
        from pydantic import SecretStr
        from ragas.llms import LangchainLLMWrapper
        from ragas.run_config import RunConfig

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from ragas.metrics import (
                Faithfulness,
                LLMContextPrecisionWithReference,
                LLMContextRecall,
            )

            # an HTTP client of its own: LangChain's shared default one binds to the first event
            # loop that uses it, and each judge runs its calls on its own loop
            chat = ChatOpenAI(
                model=self.model,
                base_url=self.base_url,
                api_key=SecretStr(api_key(self.api_key_env) or "none"),
                max_completion_tokens=self.max_tokens,
                timeout=self.timeout,
                max_retries=0,
                http_async_client=httpx.AsyncClient(timeout=self.timeout),
            )
            # one attempt inside ragas: retries belong to JudgeRunner, which counts them
            run_config = RunConfig(timeout=int(math.ceil(self.timeout)), max_retries=1)
            llm = LangchainLLMWrapper(chat, run_config=run_config)
            metrics = {"faithfulness": Faithfulness(llm=llm)}
            if self.reference_metrics:
                metrics |= {
                    "context_precision": LLMContextPrecisionWithReference(llm=llm),
                    "context_recall": LLMContextRecall(llm=llm),
                }
        for m in metrics.values():
            m.init(run_config)
        return metrics

    def _score(self, name: str, **fields: Any) -> float | None:
        from ragas.dataset_schema import SingleTurnSample

        # one loop for the judge's life: LangChain's async clients bind to it
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        coro = self._metrics[name].single_turn_ascore(
            SingleTurnSample(**fields), timeout=self.timeout
        )
        try:
            value = float(self._loop.run_until_complete(coro))
        except Exception as exc:
            key = api_key(self.api_key_env)
            if key and key in str(exc):  # a server that echoes the credentials in its error body
                raise RuntimeError(redact(f"{type(exc).__name__}: {exc}", key)) from None
            raise
        return None if math.isnan(value) else value

    def judge(
        self, query: str, contexts: Sequence[str], response: str, reference: str | None = None
    ) -> JudgeResult:
        details: dict[str, Any] = {}
        faithfulness: float | None
        if not response.strip():
            faithfulness, details = None, {"reason": "empty response", "by_rule": True}
        elif is_refusal(response):
            faithfulness, details = 1.0, {"refusal": True, "by_rule": True}
        elif not contexts:
            faithfulness, details = 0.0, {"reason": "no contexts", "by_rule": True}
        else:
            details["refusal"] = False
            faithfulness = self._score(
                "faithfulness",
                user_input=query,
                response=response,
                retrieved_contexts=list(contexts),
            )
            if faithfulness is None:
                details["reason"] = "the judge found no statements in the response"
        if self.reference_metrics and reference and contexts:
            for name in ("context_precision", "context_recall"):
                details[name] = self._score(
                    name, user_input=query, retrieved_contexts=list(contexts), reference=reference
                )
        return JudgeResult(faithfulness, details)
