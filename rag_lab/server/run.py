"""Starting a server: where it may listen, how many processes, which protocol.

- It binds ``127.0.0.1`` unless told otherwise; binding any other address without a token
  (``token_env``) is refused unless ``insecure``: an open knowledge service on a network answers
  anyone. Behind a reverse proxy that authenticates, bind loopback and let the proxy forward.
- The export is loaded before the port opens (a listening port means ready), once per process;
  ``workers`` > 1 starts uvicorn's worker processes, each loading the export from
  ``$RAG_LAB_SERVE_SETTINGS`` (its index files memory-mapped: the pages are shared).
- ``mcp="stdio"`` speaks MCP on stdin/stdout instead of HTTP; ``mcp="http"`` adds the MCP
  endpoint ``/mcp`` to the HTTP server.
"""

from __future__ import annotations

import gc
import ipaddress
import logging
import os
from dataclasses import replace
from typing import Any

from rag_lab.errors import ConfigError
from rag_lab.server.service import SETTINGS_ENV, KnowledgeService, ServeSettings

MCP_MODES = ("http", "stdio")
_MCP_ENV = "RAG_LAB_SERVE_MCP"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: where it resolves is not ours to know


def check_exposure(host: str, settings: ServeSettings, insecure: bool) -> None:
    if not is_loopback(host) and settings.token_env is None and not insecure:
        raise ConfigError(
            f"--host {host} is not a loopback address: give a token (--token-env NAME) or, to "
            "serve without one on purpose, --insecure"
        )
    settings.token()  # an unset token variable fails now, not on the first request


def app_from_env() -> Any:
    """The ASGI app of one worker process (uvicorn's factory for ``workers`` > 1)."""
    settings = ServeSettings.from_env()
    return _app(KnowledgeService(settings), os.environ.get(_MCP_ENV) == "http")


def _app(service: KnowledgeService, mcp: bool) -> Any:
    from rag_lab.server.http import create_app

    return create_app(service, mcp=mcp)


def serve(
    settings: ServeSettings,
    host: str = "127.0.0.1",
    port: int = 8080,
    workers: int = 1,
    mcp: str | None = None,
    insecure: bool = False,
    log: Any = print,
) -> None:
    """Serve until stopped (Ctrl-C, SIGTERM)."""
    if mcp is not None and mcp not in MCP_MODES:
        raise ConfigError(f"--mcp {mcp!r}: use one of {', '.join(MCP_MODES)}")
    if workers < 1:
        raise ConfigError(f"--workers {workers}: must be >= 1")
    if mcp == "stdio":
        from rag_lab.server.mcp import create_mcp

        create_mcp(KnowledgeService(settings)).run("stdio")
        return
    check_exposure(host, settings, insecure)
    import uvicorn

    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)  # one line per request: off
    where = f"http://{host}:{port}"
    extra = f", MCP at {where}/mcp" if mcp == "http" else ""
    token = "on" if settings.token_env else "off"
    if workers == 1:
        app = _app(KnowledgeService(settings), mcp == "http")
        log(f"serving {settings.export} at {where} (token {token}{extra})")
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
        return
    os.environ[SETTINGS_ENV] = settings.to_env()
    os.environ[_MCP_ENV] = mcp or ""
    # refuse a broken export here, not in every worker; then let it go: the workers load their
    # own, and this process only supervises them
    KnowledgeService(replace(settings, warm=False))
    gc.collect()
    log(f"serving {settings.export} at {where} ({workers} workers, token {token}{extra})")
    uvicorn.run(
        "rag_lab.server.run:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
        access_log=False,
    )
