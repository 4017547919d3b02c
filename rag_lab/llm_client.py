"""A minimal client for OpenAI-compatible chat-completions endpoints (OpenAI, vLLM, Ollama,
llama.cpp server, ``python -m rag_lab.llm_server``), and the API-key rules every LLM stage follows.

API keys: a config names the *environment variable* that holds the key (``api_key_env:
OPENAI_API_KEY``), never the key. The variable is read when a request is made; an unset variable
means no ``Authorization`` header (local servers need none). No error message, log line or cache
key contains the key: texts that could echo it (a server's error body) pass through ``redact``.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.errors import ConfigError, RagLabError

log = logging.getLogger(__name__)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# retried: the server is busy, restarting or overloaded; anything else 4xx is the request's fault
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


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


class ChatClient:
    """POST ``{base_url}/chat/completions``, non-streaming, with retries.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (a trailing slash is ignored).
        model: the ``model`` field of each request.
        timeout: seconds per HTTP request.
        retries: extra attempts after a failure that may pass (connection refused or reset,
            timeout, HTTP 408/429/5xx, a reply that is not a chat completion); other HTTP errors
            fail at once.
        backoff: seconds before the first retry, doubling each time.
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
        if not str(base_url).startswith(("http://", "https://")):
            raise ConfigError(f"{where}.base_url must be an http(s) URL, got {base_url!r}")
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise ConfigError(f"{where}: timeout must be > 0, retries and backoff >= 0")
        self.base_url, self.model = str(base_url).rstrip("/"), str(model)
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.api_key_env = check_env_name(api_key_env, where)
        self.url = f"{self.base_url}/chat/completions"
        self.attempts = 0  # HTTP requests sent by this client (tests and logs)

    def __repr__(self) -> str:  # no key here: only its variable's name
        return f"ChatClient({self.url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    def complete(self, messages: Sequence[Mapping[str, str]], **params: Any) -> dict[str, Any]:
        """The first choice of a chat completion: ``{"content", "finish_reason", "usage"}``.
        ``params`` (temperature, max_tokens, ...) go into the request body as given. Raises
        ``EndpointError`` naming the URL once the retries are spent."""
        import httpx

        key = api_key(self.api_key_env)
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        body = {"model": self.model, "messages": [dict(m) for m in messages], **params}
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            self.attempts += 1
            try:
                resp = httpx.post(self.url, json=body, headers=headers, timeout=self.timeout)
            except httpx.TimeoutException:
                last = f"no reply within {self.timeout:g} s"
                continue
            except httpx.TransportError as exc:
                last = f"cannot connect ({type(exc).__name__}: {redact(str(exc), key)})"
                continue
            if resp.status_code != 200:
                detail = redact(resp.text[:300].strip(), key)
                last = f"HTTP {resp.status_code}: {detail}"
                if resp.status_code in RETRY_STATUS:
                    continue
                hint = (
                    f" (is ${self.api_key_env} set to a valid key?)"
                    if resp.status_code in (401, 403)
                    else ""
                )
                raise EndpointError(f"{self.url} answered {last}{hint}")
            try:
                return parse_completion(resp.json())
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                last = f"malformed reply ({type(exc).__name__}: {redact(str(exc), key)[:200]})"
        raise EndpointError(
            f"{self.url}: {last} after {self.retries + 1} attempt(s); "
            "is the server running and the URL right?"
        )


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
