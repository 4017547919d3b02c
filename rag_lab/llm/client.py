"""Clients for OpenAI-compatible endpoints (OpenAI, vLLM, Ollama, llama.cpp server,
text-embeddings-inference, ``rag-lab llm-server``) through the ``openai`` SDK, and the API-key
rules every endpoint stage (generator, embedder, judge) follows.

API keys: a config names the *environment variable* that holds the key (``api_key_env:
OPENAI_API_KEY``), never the key. The variable is read when a request is made; an unset variable
means no ``Authorization`` header (local servers need none). No error message, log line or cache
key contains the key: texts that could echo it (a server's error body) pass through ``redact``.

Retries: the SDK's (``max_retries``): a connection error, a timeout, HTTP 408/409/429/5xx are
retried after 0.5 s, doubling up to 8 s with jitter, or after the server's ``Retry-After``; any
other status fails at once. A 200 whose body is not the expected reply is retried here, within
the same budget (``retries`` extra attempts in all), ``backoff`` seconds apart, doubling.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rag_lab.errors import ConfigError, RagLabError

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# what the openai SDK retries (its ``_should_retry``): busy, restarting, overloaded, rate-limited;
# any other 4xx is the request's fault
RETRY_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))


class EndpointError(RagLabError):
    """An LLM endpoint could not be used: unreachable, an error status, a malformed reply."""


def check_env_name(name: str | None, where: str) -> str | None:
    """``name`` when it is a plausible environment variable name (or None). A value that is not
    one, e.g. a key pasted where its variable's name belongs, is refused without being echoed."""
    if name is None or name == "":
        return None
    if not _ENV_NAME.fullmatch(name) or len(name) > 128:
        raise ConfigError(
            f"{where}.api_key_env must be the NAME of an environment variable "
            "holding the key (e.g. OPENAI_API_KEY), not the key itself"
        )
    return name


# the key part of an override that carries a credential (``generator.api_key_env``, ``+x.token``)
_SECRET_KEY = re.compile(r"(api_?key|secret|password|passwd|(^|_)token)(_env)?$", re.IGNORECASE)
# how API keys of the common providers begin (OpenAI, Anthropic, HF, GitHub, Groq, xAI, Slack,
# Google)
_KEY_PREFIX = re.compile(r"(sk|pk|rk|hf|ghp|gho|ghs|ghu|github_pat|gsk|xai|xox[abprs])[-_]|AIza")


def looks_like_secret(value: str) -> bool:
    """``value`` could be a key rather than the name of the variable holding one: it is not a
    plausible environment variable name, or it starts the way API keys do (``sk-``, ``hf_``,
    ...). ``null``, empty values and interpolations (``${oc.env:X}``) are not secrets."""
    text = value.strip().strip("'\"")
    if text in ("", "null", "None", "~") or text.startswith("${"):
        return False
    return _KEY_PREFIX.match(text) is not None or not _ENV_NAME.fullmatch(text)


def check_overrides(overrides: Sequence[str]) -> None:
    """Refuse a command line that pastes a credential into a config key
    (``generator.api_key_env=sk-...``) before Hydra writes the overrides into the run folder
    (``.hydra/overrides.yaml``, ``config.yaml``). The message names the key, never the value."""
    for arg in overrides:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, _, value = arg.partition("=")
        key = key.lstrip("+~")
        last = key.rsplit(".", 1)[-1]
        if not _SECRET_KEY.search(last):
            continue
        if any(looks_like_secret(v) for v in value.split(",")):
            raise ConfigError(
                f"{key}=<redacted>: the value looks like a key, and a command line is saved with "
                "the run; give the NAME of an environment variable holding it instead "
                f"(e.g. {key}=OPENAI_API_KEY, after export OPENAI_API_KEY=...); nothing was written"
            )


def api_key(env_name: str | None) -> str | None:
    """The key in ``$env_name`` (None when the name is None or the variable unset/empty)."""
    return (os.environ.get(env_name) or None) if env_name else None


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``***``."""
    return text.replace(secret, "***") if secret else text


def check_endpoint(base_url: str, timeout: float, retries: int, backoff: float, where: str) -> str:
    """``base_url`` without its trailing slash, once it is an http(s) URL and the retry settings
    are usable; ``ConfigError`` naming ``where`` otherwise."""
    if not str(base_url).startswith(("http://", "https://")):
        raise ConfigError(f"{where}.base_url must be an http(s) URL, got {base_url!r}")
    if timeout <= 0 or retries < 0 or backoff < 0:
        raise ConfigError(f"{where}: timeout must be > 0, retries and backoff >= 0")
    return str(base_url).rstrip("/")


class Endpoint:
    """One OpenAI-compatible API root, reached through the ``openai`` SDK (built on first use).

    ``post(kind, call)`` runs ``call(sdk_client, headers)`` — an SDK ``with_raw_response`` method
    — with the key of ``$api_key_env`` in ``headers`` and the SDK's retries, then ``parse`` on
    the reply's JSON; a reply ``parse`` refuses (``ValueError``, ``KeyError``, ...) is re-sent
    within the same ``retries`` budget. Every failure becomes one ``EndpointError`` naming the
    URL; the key never appears in it. ``attempts`` counts the HTTP requests sent.
    """

    def __init__(
        self,
        base_url: str,
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 1.0,
        api_key_env: str | None = "OPENAI_API_KEY",
        where: str = "generator",
    ) -> None:
        self.base_url = check_endpoint(base_url, timeout, retries, backoff, where)
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.api_key_env = check_env_name(api_key_env, where)
        self.attempts = 0
        self._sdk: openai.OpenAI | None = None

    def __repr__(self) -> str:  # no key here: only its variable's name
        return f"Endpoint({self.base_url!r}, api_key_env={self.api_key_env!r})"

    def _count(self, request: Any) -> None:
        self.attempts += 1

    def sdk(self, retries: int) -> openai.OpenAI:
        """The SDK client with ``retries`` extra attempts. It holds a placeholder key only: the
        real one goes into each request's headers (``post``)."""
        import openai

        if self._sdk is None:
            hooks = {"request": [self._count]}
            self._sdk = openai.OpenAI(
                base_url=self.base_url,
                api_key="unused",  # never sent: ``post`` sets or omits Authorization per request
                timeout=self.timeout,
                max_retries=self.retries,
                http_client=openai.DefaultHttpxClient(event_hooks=hooks),
            )
        return self._sdk if retries == self.retries else self._sdk.with_options(max_retries=retries)

    def post(
        self,
        path: str,
        call: Callable[[openai.OpenAI, dict[str, Any]], Any],
        parse: Callable[[Any], Any],
    ) -> Any:
        """``parse(reply JSON)`` of ``call(client, extra_headers)`` to ``{base_url}{path}``."""
        import openai

        url = f"{self.base_url}{path}"
        key = api_key(self.api_key_env)
        headers: dict[str, Any] = {"Authorization": f"Bearer {key}" if key else openai.omit}
        start, malformed = self.attempts, 0
        while True:
            sent = self.attempts - start
            try:
                raw = call(self.sdk(self.retries - sent), headers)
            except openai.APITimeoutError:
                last = f"no reply within {self.timeout:g} s"
            except openai.APIConnectionError as exc:
                cause = exc.__cause__ or exc
                last = f"cannot connect ({type(cause).__name__}: {redact(str(cause), key)})"
            except openai.APIStatusError as exc:
                detail = redact(exc.response.text[:300].strip(), key)
                last = f"HTTP {exc.status_code}: {detail}"
                if exc.status_code not in RETRY_STATUS:
                    hint = (
                        f" (is ${self.api_key_env} set to a valid key?)"
                        if exc.status_code in (401, 403)
                        else ""
                    )
                    raise EndpointError(f"{url} answered {last}{hint}") from None
            else:
                try:
                    return parse(raw.http_response.json())
                except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
                    last = f"malformed reply ({type(exc).__name__}: {redact(str(exc), key)[:200]})"
                    if self.attempts - start <= self.retries:
                        time.sleep(self.backoff * 2**malformed)
                        malformed += 1
                        continue
            n = self.attempts - start
            raise EndpointError(
                f"{url}: {last} after {n} attempt(s); is the server running and the URL right?"
            ) from None


class ChatClient:
    """POST ``{base_url}/chat/completions``, non-streaming, through :class:`Endpoint`.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (a trailing slash is ignored).
        model: the ``model`` field of each request.
        timeout: seconds per HTTP request.
        retries: extra attempts after a failure that may pass (connection refused or reset,
            timeout, HTTP 408/409/429/5xx: the SDK's retries; a reply that is not a chat
            completion); other HTTP errors fail at once.
        backoff: seconds before re-sending after a malformed reply, doubling (the SDK paces the
            others: see the module docstring).
        api_key_env: name of the environment variable with the key (see the module docstring).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 1.0,
        api_key_env: str | None = "OPENAI_API_KEY",
        where: str = "generator",
    ) -> None:
        self.endpoint = Endpoint(base_url, timeout, retries, backoff, api_key_env, where)
        self.base_url, self.model = self.endpoint.base_url, str(model)
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.api_key_env = self.endpoint.api_key_env
        self.url = f"{self.base_url}/chat/completions"

    @property
    def attempts(self) -> int:
        """HTTP requests sent by this client (tests and logs)."""
        return self.endpoint.attempts

    def __repr__(self) -> str:  # no key here: only its variable's name
        return f"ChatClient({self.url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    def complete(self, messages: Sequence[Mapping[str, str]], **params: Any) -> dict[str, Any]:
        """The first choice of a chat completion: ``{"content", "finish_reason", "usage"}``.
        ``params`` (temperature, max_tokens, ...) go into the request body as given. Raises
        ``EndpointError`` naming the URL once the retries are spent."""
        msgs = [dict(m) for m in messages]

        def call(client: openai.OpenAI, headers: dict[str, Any]) -> Any:
            return client.chat.completions.with_raw_response.create(
                model=self.model,
                messages=msgs,  # type: ignore[arg-type]  # plain role/content dicts
                extra_body=params,
                extra_headers=headers,
            )

        return self.endpoint.post("/chat/completions", call, parse_completion)  # type: ignore[no-any-return]


def parse_completion(data: Any) -> dict[str, Any]:
    """``{"content", "finish_reason", "usage"}`` of a chat-completion JSON; ``ValueError`` when
    ``data`` is not one (no choices, no string content)."""
    choice = data["choices"][0]
    content = choice["message"]["content"]
    if not isinstance(content, str):
        raise ValueError(f"choices[0].message.content is {type(content).__name__}, not a string")
    return {
        "content": content,
        "finish_reason": choice.get("finish_reason"),
        "usage": data.get("usage") or {},
    }
