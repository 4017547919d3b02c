"""``rag-lab llm-server --model PATH [--port 8000]`` (or ``python -m rag_lab.llm_server``; the
command line is :mod:`rag_lab.cli.llm_server`): a small OpenAI-compatible server for a local
causal LM (transformers: a model folder, an HF id in the local cache, or a GGUF file), so
``generator=openai`` and ``judge=ragas`` can run against a model on this machine.

Endpoints: ``GET /v1/models``, ``GET /health``, ``POST /v1/chat/completions`` (non-streaming,
``n`` = 1; honours ``max_tokens`` / ``max_completion_tokens``, ``temperature`` (0 = greedy) and
``stop``; other fields such as ``response_format`` are accepted and ignored). Any ``model`` name is
accepted: the server has one model. Requests are generated one at a time. The model is loaded
before the port opens, so a successful ``GET /health`` means ready. Stdlib ``http.server``: for a
trusted local network only (binds 127.0.0.1 by default; ``--api-key-env`` makes it require
``Authorization: Bearer $VAR``).
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger("rag_lab.llm_server")


class BadRequest(ValueError):
    pass


def parse_request(body: Any, default_max_tokens: int, default_temperature: float) -> dict[str, Any]:
    """``{"messages", "max_new_tokens", "temperature", "stop"}`` of a chat-completions request body;
    ``BadRequest`` naming the field that is wrong."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if body.get("stream"):
        raise BadRequest("stream=true is not supported by rag_lab.llm_server")
    if body.get("n", 1) != 1:
        raise BadRequest("only n=1 is supported")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must be a non-empty list")
    messages = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a 'role'")
        content = m.get("content")
        if isinstance(content, list):  # OpenAI content parts: keep the text ones
            content = "".join(
                p.get("text", "")
                for p in content
                if isinstance(p, dict) and p.get("type") == "text"
            )
        if not isinstance(content, str):
            raise BadRequest(f"messages[{i}].content must be a string or a list of text parts")
        messages.append({"role": m["role"], "content": content})
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or default_max_tokens
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest("max_tokens must be a positive integer")
    temperature = body.get("temperature")
    temperature = default_temperature if temperature is None else temperature
    if not isinstance(temperature, (int, float)) or temperature < 0:
        raise BadRequest("temperature must be a number >= 0")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise BadRequest("stop must be a string or a list of strings")
    return {
        "messages": messages,
        "max_new_tokens": max_tokens,
        "temperature": float(temperature),
        "stop": stop,
    }


def make_handler(
    model: Any, served_name: str, max_tokens: int, temperature: float, api_key_env: str | None
) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to ``model`` (anything with ``chat(messages, max_new_tokens,
    temperature, stop)`` returning a ``ChatOutput``)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stall

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            log.debug("%s %s", self.address_string(), format % args)

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
            self._send(status, {"error": {"message": message, "type": kind, "code": status}})

        def _authorised(self) -> bool:
            key = os.environ.get(api_key_env) if api_key_env else None
            if key and self.headers.get("Authorization") != f"Bearer {key}":
                self._error(401, "missing or wrong API key", "authentication_error")
                return False
            return True

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path.rstrip("/") in ("/health", "/v1/health"):
                self._send(200, {"status": "ok", "model": served_name})
            elif self.path.rstrip("/") == "/v1/models":
                if self._authorised():
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": [
                                {
                                    "id": served_name,
                                    "object": "model",
                                    "created": 0,
                                    "owned_by": "rag_lab",
                                }
                            ],
                        },
                    )
            else:
                self._error(404, f"no route GET {self.path}")

        def do_POST(self) -> None:  # noqa: N802
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._error(404, f"no route POST {self.path}")
                return
            if not self._authorised():
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                req = parse_request(body, max_tokens, temperature)
            except ValueError as exc:  # BadRequest and malformed JSON
                self._error(400, str(exc))
                return
            try:
                out = model.chat(
                    req["messages"],
                    max_new_tokens=req["max_new_tokens"],
                    temperature=req["temperature"],
                    stop=req["stop"],
                )
            except Exception as exc:  # the client sees a 500 and may retry
                log.exception("generation failed")
                self._error(500, f"generation failed: {type(exc).__name__}: {exc}", "server_error")
                return
            log.info(
                "chat: %d prompt + %d completion tokens in %.2f s (%.1f tok/s, finish=%s)",
                out.prompt_tokens,
                out.completion_tokens,
                out.seconds,
                out.completion_tokens / out.seconds if out.seconds else 0.0,
                out.finish_reason,
            )
            self._send(
                200,
                {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": served_name,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": out.text},
                            "finish_reason": out.finish_reason,
                        }
                    ],
                    "usage": {
                        "prompt_tokens": out.prompt_tokens,
                        "completion_tokens": out.completion_tokens,
                        "total_tokens": out.prompt_tokens + out.completion_tokens,
                    },
                },
            )

    return Handler


def serve(
    model: Any,
    served_name: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_tokens: int = 512,
    temperature: float = 0.0,
    api_key_env: str | None = None,
) -> ThreadingHTTPServer:
    """A bound (not yet serving) server; call ``serve_forever()`` on it. ``port=0`` picks a free
    port (``server.server_address[1]``)."""
    handler = make_handler(model, served_name, max_tokens, temperature, api_key_env)
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


if __name__ == "__main__":  # ``python -m rag_lab.llm_server``: the command line is rag_lab.cli's
    from rag_lab.cli.llm_server import main

    main()
