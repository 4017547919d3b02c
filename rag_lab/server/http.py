"""The HTTP API of a served export (FastAPI; the OpenAPI schema at ``/openapi.json``).

- ``POST /v1/retrieve`` ``{query, k?, as_of?, filters?, metadata?, principal?}`` → the chunks with
  their text, score and every contract field, the query's flags and each stage's time
  (``rag_lab.export.search``).
- ``POST /v1/answer`` ``{query, as_of?, filters?, metadata?, principal?}`` (with a generator) → the
  answer, the chunks it read and cited, the judge's verdict and the flags
  (``rag_lab.export.answer``).
- ``GET /v1/chunks/{chunk_id}?user=&group=`` → one chunk (404 when the principal may not read
  it: an export with a ``permissions`` policy answers only what the request's principal may
  read, anonymous when it names none); ``GET /v1/info`` → the pipeline card, the data and
  the metrics it won on, source health; ``GET /healthz`` (alive) and ``GET /readyz`` (loaded; the
  stale sources listed).
- With ``mcp``: the MCP tools over streamable HTTP at ``/mcp`` (``rag_lab.server.mcp``).

Requests are checked by their models (unknown fields refused, ``k`` an integer in
``1..k_max``, a non-empty query under ``max_query_chars``); every error is JSON
``{"error": {"type", "message"}}`` with status 400, 401, 404, 413 or 500, never a traceback or
a server path. The pipeline runs on the event loop: its runs take turns anyway (its stages keep
a run's state) and a thread hop per request costs more than it gives; ``--workers`` adds
processes.
"""

# no `from __future__ import annotations`: FastAPI reads the request models from the endpoints'
# annotations, which name classes made inside create_app

import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

import orjson
from fastapi import FastAPI, Request
from fastapi import Query as QueryParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag_lab._version import __version__
from rag_lab.errors import RagLabError
from rag_lab.server.guard import Guard, error_body
from rag_lab.server.service import KnowledgeService

log = logging.getLogger(__name__)

Scalar = StrictStr | StrictInt | StrictFloat | StrictBool
Filters = dict[StrictStr, Scalar | list[Scalar]]


class PrincipalModel(BaseModel):
    """Who asks: a user and the groups it belongs to (``rag_lab.access``)."""

    model_config = ConfigDict(extra="forbid")
    user: StrictStr | None = None
    groups: list[StrictStr] = []


Principal = StrictStr | PrincipalModel


def _principal(value: Any) -> Any:
    return value.model_dump() if isinstance(value, PrincipalModel) else value


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)


def _error(status: int, kind: str, message: str) -> Response:
    return Response(error_body(kind, message), status_code=status, media_type="application/json")


def _models(k_max: int, max_chars: int) -> tuple[type[BaseModel], type[BaseModel]]:
    Query = Annotated[StrictStr, Field(min_length=1, max_length=max_chars)]

    class RetrieveRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        query: Query
        k: Annotated[StrictInt, Field(ge=1, le=k_max)] = 10
        as_of: dt.date | None = Field(None, description="ISO date: editions valid that day")
        filters: Filters | None = Field(
            None, description="metadata field -> value or values a chunk must match"
        )
        metadata: dict[StrictStr, Any] | None = Field(
            None, description="the query's metadata (device model, earlier turns as history)"
        )
        principal: Principal | None = Field(
            None, description="who asks: {user, groups} or a user name (permissions)"
        )

    class AnswerRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        query: Query
        as_of: dt.date | None = None
        filters: Filters | None = None
        metadata: dict[StrictStr, Any] | None = None
        principal: Principal | None = None

    return RetrieveRequest, AnswerRequest


def _first_problem(exc: RequestValidationError) -> str:
    """One line naming the field and what is wrong (no input echoed, no internals)."""
    errors = exc.errors()
    if not errors:
        return "invalid request"
    first = errors[0]
    if first.get("type") == "json_invalid":
        return "body: not valid JSON"
    path = [str(p) for p in first.get("loc", ()) if p != "body" and not isinstance(p, int)]
    return f"{'.'.join(path) or 'body'}: {first.get('msg', 'invalid')}"


def create_app(service: KnowledgeService, mcp: bool = False) -> Any:
    """The ASGI app: the API behind its guard (body limit, bearer token)."""
    settings = service.settings
    RetrieveRequest, AnswerRequest = _models(settings.k_max, settings.max_query_chars)
    mcp_server = None
    if mcp:
        from rag_lab.server.mcp import create_mcp

        mcp_server = create_mcp(service)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if mcp_server is None:
            yield
            return
        async with mcp_server.session_manager.run():
            yield

    app = FastAPI(
        title="rag_lab knowledge service",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        lifespan=lifespan,
    )

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        return _error(400, "invalid_request", _first_problem(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        kinds = {404: "not_found", 405: "method_not_allowed"}
        return _error(exc.status_code, kinds.get(exc.status_code, "http_error"), str(exc.detail))

    @app.exception_handler(RagLabError)
    async def refused(_: Request, exc: RagLabError) -> Response:
        return _error(400, "invalid_request", str(exc).splitlines()[0][:500])

    @app.exception_handler(Exception)
    async def failed(_: Request, exc: Exception) -> Response:
        log.exception("request failed")  # the traceback goes to the server's log, not the client
        return _error(500, "internal", "the request failed; see the server's log")

    @app.post("/v1/retrieve", response_class=JSON)
    async def retrieve(request: RetrieveRequest) -> Any:  # type: ignore[valid-type]
        r: Any = request
        return service.search(
            r.query,
            r.k,
            as_of=None if r.as_of is None else r.as_of.isoformat(),
            filters=r.filters,
            metadata=r.metadata,
            principal=_principal(r.principal),
        )

    @app.post("/v1/answer", response_class=JSON)
    async def answer(request: AnswerRequest) -> Any:  # type: ignore[valid-type]
        if not service.has_generator:
            return _error(404, "not_found", "this export has no generator: use /v1/retrieve")
        r: Any = request
        return service.answer(
            r.query,
            as_of=None if r.as_of is None else r.as_of.isoformat(),
            filters=r.filters,
            metadata=r.metadata,
            principal=_principal(r.principal),
        )

    @app.get("/v1/chunks/{chunk_id:path}", response_class=JSON)
    async def chunk(
        chunk_id: str,
        user: Annotated[StrictStr | None, QueryParam()] = None,
        group: Annotated[list[StrictStr] | None, QueryParam()] = None,
    ) -> Any:
        # who asks: ?user=alice&group=ops&group=qa (with a permissions policy; none: anonymous)
        who = None if user is None and not group else {"user": user, "groups": group or []}
        found = service.get_chunk(chunk_id, who)
        return found if found is not None else _error(404, "not_found", "no such chunk")

    @app.get("/v1/info", response_class=JSON)
    async def info() -> Any:
        return service.info()

    @app.get("/healthz", response_class=JSON)
    async def healthz() -> Any:
        return {"status": "ok"}

    @app.get("/readyz", response_class=JSON)
    async def readyz() -> Any:
        health = service.health()
        return {"status": "ready", "stale_sources": health["stale"], "undated": health["undated"]}

    if mcp_server is not None:  # the MCP endpoint beside the API, behind the same guard
        http_app = mcp_server.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, json_response=True
        )
        app.router.routes.extend(http_app.routes)
    return Guard(app, settings.max_body_bytes, settings.token())
