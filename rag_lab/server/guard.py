"""The server's door, as plain ASGI middleware in front of every route: a request body over the
limit is answered 413 before it is read (by ``Content-Length``; a chunked body is read up to the
limit and handed on), and with a token every route but ``/healthz`` needs
``Authorization: Bearer <token>`` (401 otherwise). Errors are JSON
``{"error": {"type", "message"}}``, like the app's own."""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/healthz"})  # a load balancer's liveness probe carries no token


def error_body(kind: str, message: str) -> bytes:
    return json.dumps({"error": {"type": kind, "message": message}}).encode()


async def _reply(send: Send, status: int, kind: str, message: str, **headers: str) -> None:
    body = error_body(kind, message)
    extra = [(k.encode(), v.encode()) for k, v in headers.items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _replay(first: Message, receive: Receive) -> Receive:
    """A ``receive`` that gives ``first`` once, then the connection's own messages (a client
    that goes away is still seen going)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return first
        return await receive()

    return replayed


class Guard:
    """``max_body_bytes``: the largest body read; ``token``: the bearer token (``None``: open)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, token: str | None = None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.token = None if token is None else f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if self.token is not None and scope.get("path") not in OPEN_PATHS:
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(given, self.token):
                await _reply(
                    send,
                    401,
                    "unauthorized",
                    "a bearer token is required",
                    **{"www-authenticate": "Bearer"},
                )
                return
        length = headers.get(b"content-length")
        if length is not None:
            try:
                too_large = int(length) > self.max_body_bytes
            except ValueError:
                await _reply(send, 400, "invalid_request", "Content-Length is not a number")
                return
            if too_large:
                await _reply(send, 413, "too_large", self._limit())
                return
            await self.app(scope, receive, send)
            return
        # no Content-Length (a chunked body): read it up to the limit, then hand it on
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # gone before its body came
                await self.app(scope, _replay(message, receive), send)
                return
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
            if len(body) > self.max_body_bytes:
                await _reply(send, 413, "too_large", self._limit())
                return
        whole = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay(whole, receive), send)

    def _limit(self) -> str:
        return f"request body over {self.max_body_bytes} bytes"
