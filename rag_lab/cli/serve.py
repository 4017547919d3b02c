"""``rag-lab serve EXPORT [--host 127.0.0.1] [--port 8080] [--workers N] [--token-env NAME]
[--insecure] [--mcp [http|stdio]] [--endpoint STAGE.KEY=VALUE ...] [--max-age-days TYPE=DAYS ...]``:
serve an export to agents over HTTP (and MCP) (:mod:`rag_lab.server`; docs/serve.md).

Exit codes: 0 stopped, 2 refusal (a broken export, an exposed address without a token, a stage
calling an endpoint nobody named) or usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rag_lab.errors import ConfigError, user_errors


def _pairs(values: Sequence[str], option: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise ConfigError(f"{option} {value!r}: expected KEY=VALUE")
        out[key] = rest
    return out


def endpoints(values: Sequence[str]) -> dict[str, dict[str, str]]:
    """``STAGE.base_url=URL`` / ``STAGE.api_key_env=NAME`` → ``{STAGE: {key: value}}``."""
    out: dict[str, dict[str, str]] = {}
    for key, value in _pairs(values, "--endpoint").items():
        stage, _, field = key.rpartition(".")
        if field not in ("base_url", "api_key_env") or not stage:
            raise ConfigError(
                f"--endpoint {key}: expected STAGE.base_url=URL or STAGE.api_key_env=NAME"
            )
        out.setdefault(stage, {})[field] = value
    return out


def max_age(values: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {"default": 180}
    for key, value in _pairs(values, "--max-age-days").items():
        if not value.isdigit():
            raise ConfigError(f"--max-age-days {key}={value}: days must be a whole number")
        out[key] = int(value)
    return out


def add_export_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("export", type=Path, help="a folder written by `rag-lab export`")
    ap.add_argument(
        "--max-age-days",
        action="append",
        default=[],
        metavar="TYPE=DAYS",
        help="a source of TYPE older than DAYS is stale (default=180 for every type)",
    )
    ap.add_argument(
        "--no-verify",
        action="store_true",
        help="load the export even if its files differ from manifest.json",
    )
    ap.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="let the export's stages load code shipped with a model",
    )


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="rag-lab serve",
        epilog="endpoints, flags, health and running it safely: docs/serve.md",
        description="Serve an export to agents: HTTP API (and MCP) with metadata, flags and "
        "source health.",
    )
    add_export_options(ap)
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    ap.add_argument(
        "--token-env",
        metavar="NAME",
        help="require Authorization: Bearer $NAME on every request but /healthz",
    )
    ap.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback --host without a token",
    )
    ap.add_argument(
        "--mcp",
        nargs="?",
        const="http",
        choices=["http", "stdio"],
        help="MCP tools too: at /mcp beside the API (http, the default) or on stdin/stdout",
    )
    ap.add_argument(
        "--endpoint",
        action="append",
        default=[],
        metavar="STAGE.KEY=VALUE",
        help="the endpoint of a stage that calls one (an export never chooses it): "
        "STAGE.base_url=URL, STAGE.api_key_env=NAME",
    )
    ap.add_argument("--k-max", type=int, default=100, help="largest k a request may ask")
    ap.add_argument("--max-query-chars", type=int, default=4096)
    ap.add_argument(
        "--max-body-bytes",
        type=int,
        default=1_000_000,
        help="larger request bodies are answered 413 unread (default 1 MB)",
    )
    return ap


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    from rag_lab.server.run import serve
    from rag_lab.server.service import ServeSettings

    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    for name in ("k_max", "max_query_chars", "max_body_bytes"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1")
    settings = ServeSettings(
        export=str(args.export),
        k_max=args.k_max,
        max_query_chars=args.max_query_chars,
        max_body_bytes=args.max_body_bytes,
        token_env=args.token_env,
        max_age_days=max_age(args.max_age_days),
        endpoints=endpoints(args.endpoint),
        verify=not args.no_verify,
        trust_remote_code=args.trust_remote_code,
    )
    log = (lambda m: print(m, file=sys.stderr)) if args.mcp == "stdio" else print
    serve(
        settings,
        args.host,
        args.port,
        args.workers,
        mcp=args.mcp,
        insecure=args.insecure,
        log=log,
    )
