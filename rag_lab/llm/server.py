"""``rag-lab llm-server --model PATH [--port 8000]`` (or ``python -m rag_lab.cli llm-server``; the
command line is :mod:`rag_lab.cli.llm_server`): a small OpenAI-compatible server for a local
causal LM (transformers: a model folder, an HF id in the local cache, or a GGUF file), so
``generator=openai`` and ``judge=ragas`` can run against a model on this machine.

Endpoints: ``GET /v1/models``, ``GET /health``, ``POST /v1/chat/completions`` (non-streaming,
``n`` = 1; honours ``max_tokens`` / ``max_completion_tokens``, ``temperature`` (0 = greedy) and
``stop``; other fields such as ``response_format`` are accepted and ignored). Any ``model`` name is
accepted: the server has one model. Requests are generated one at a time. The model is loaded
before the port opens, so a successful ``GET /health`` means ready. FastAPI on uvicorn (both come
with MLflow); errors in OpenAI's shape (``{"error": {"message", "type", "code"}}``). For a
trusted local network only: binds 127.0.0.1 by default; ``--api-key-env`` makes it require
``Authorization: Bearer $VAR``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

# at module level: FastAPI reads the (string) annotations of the route functions in this module's
# globals to tell the ``Request`` parameter from a query parameter
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

log = logging.getLogger("rag_lab.llm.server")


class BadRequest(ValueError):
    pass


def parse_request(body: Any, default_max_tokens: int, default_temperature: float) -> dict[str, Any]:
    """``{"messages", "max_new_tokens", "temperature", "stop"}`` of a chat-completions request body;
    ``BadRequest`` naming the field that is wrong."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if body.get("stream"):
        raise BadRequest("stream=true is not supported by rag_lab.llm.server")
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


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": status}}, status_code=status
    )


def create_app(
    model: Any, served_name: str, max_tokens: int, temperature: float, api_key_env: str | None
) -> FastAPI:
    """The FastAPI app serving ``model`` (anything with ``chat(messages, max_new_tokens,
    temperature, stop)`` returning a ``ChatOutput``). Bodies are read and checked by
    ``parse_request``, not by FastAPI's validation, so a bad field is a 400 naming it."""
    app = FastAPI(title="rag_lab.llm.server", docs_url=None, redoc_url=None, openapi_url=None)
    one_at_a_time = threading.Lock()

    @app.exception_handler(HTTPException)
    async def no_route(request: Request, exc: HTTPException) -> Any:  # 404 and 405 alike
        return _error(404, f"no route {request.method} {request.url.path}")

    def authorised(request: Request) -> bool:
        key = os.environ.get(api_key_env) if api_key_env else None
        return not key or request.headers.get("authorization") == f"Bearer {key}"

    def unauthorised() -> Any:
        return _error(401, "missing or wrong API key", "authentication_error")

    async def health() -> Any:
        return {"status": "ok", "model": served_name}

    async def models(request: Request) -> Any:
        if not authorised(request):
            return unauthorised()
        card = {"id": served_name, "object": "model", "created": 0, "owned_by": "rag_lab"}
        return {"object": "list", "data": [card]}

    def generate(req: dict[str, Any]) -> Any:
        with one_at_a_time:
            return model.chat(
                req["messages"],
                max_new_tokens=req["max_new_tokens"],
                temperature=req["temperature"],
                stop=req["stop"],
            )

    async def chat(request: Request) -> Any:
        if not authorised(request):
            return unauthorised()
        try:
            req = parse_request(
                json.loads(await request.body() or b"null"), max_tokens, temperature
            )
        except ValueError as exc:  # BadRequest and malformed JSON
            return _error(400, str(exc))
        try:
            out = await run_in_threadpool(generate, req)
        except Exception as exc:  # the client sees a 500 and may retry
            log.exception("generation failed")
            return _error(500, f"generation failed: {type(exc).__name__}: {exc}", "server_error")
        log.info(
            "chat: %d prompt + %d completion tokens in %.2f s (%.1f tok/s, finish=%s)",
            out.prompt_tokens,
            out.completion_tokens,
            out.seconds,
            out.completion_tokens / out.seconds if out.seconds else 0.0,
            out.finish_reason,
        )
        return {
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
        }

    routes: list[tuple[str, list[str], Callable[..., Any]]] = [
        ("/health", ["GET"], health),
        ("/v1/health", ["GET"], health),
        ("/v1/models", ["GET"], models),
        ("/v1/chat/completions", ["POST"], chat),
    ]
    for path, methods, endpoint in routes:  # a trailing slash answers too, without a redirect
        for spelling in (path, f"{path}/"):
            app.add_api_route(spelling, endpoint, methods=methods, include_in_schema=False)
    return app


class Server:
    """uvicorn serving the app on a socket bound at construction (so a taken port fails at once
    and ``server_address`` holds the port ``0`` picked). ``serve_forever()`` blocks (Ctrl-C
    stops it); ``shutdown()`` stops it from another thread and waits; ``server_close()`` closes
    the socket."""

    def __init__(self, app: FastAPI, host: str, port: int) -> None:
        import uvicorn

        self.socket = socket.create_server((host, port))
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self._uvicorn = uvicorn.Server(config)
        self._done = threading.Event()
        self._done.set()

    def serve_forever(self) -> None:
        self._done.clear()
        try:
            self._uvicorn.run(sockets=[self.socket])
        finally:
            self._done.set()

    def shutdown(self) -> None:
        self._uvicorn.should_exit = True
        self._done.wait()

    def server_close(self) -> None:
        self.socket.close()


def serve(
    model: Any,
    served_name: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_tokens: int = 512,
    temperature: float = 0.0,
    api_key_env: str | None = None,
) -> Server:
    """A bound (not yet serving) server; call ``serve_forever()`` on it. ``port=0`` picks a free
    port (``server.server_address[1]``)."""
    return Server(create_app(model, served_name, max_tokens, temperature, api_key_env), host, port)
