"""``rag-lab serve EXPORT --mcp``: the MCP tools driven by the official SDK's own client, over
stdio (the server a subprocess) and over streamable HTTP at ``/mcp`` beside the API."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import anyio
import httpx
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.cli.helpers import ENV


def _result(call) -> dict:
    assert not call.is_error, call.content
    if call.structured_content is not None:
        return dict(call.structured_content)
    return json.loads(call.content[0].text)


async def _use(target) -> tuple[list[str], dict, dict]:
    async with Client(target) as client:
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        found = _result(
            await client.call_tool("search_knowledge", {"query": "HX-200 换油周期", "k": 3})
        )
        chunk = _result(
            await client.call_tool("get_chunk", {"chunk_id": found["hits"][0]["chunk_id"]})
        )
    return tools, found, chunk


def _check(tools, found, chunk) -> None:
    assert tools == ["get_chunk", "search_knowledge"]
    assert len(found["hits"]) == 3 and "flags" in found and "timings_ms" in found
    assert found["hits"][0]["metadata"]["source_type"]
    assert chunk["chunk_id"] == found["hits"][0]["chunk_id"] and chunk["text"]


def test_the_tools_over_stdio(production_export):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rag_lab.cli", "serve", str(production_export), "--mcp", "stdio"],
        env=dict(ENV),
    )
    _check(*anyio.run(_use, params))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_tools_over_streamable_http_beside_the_api(production_export):
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rag_lab.cli",
            "serve",
            str(production_export),
            "--port",
            str(port),
            "--mcp",
        ],
        env=dict(ENV),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        _check(*anyio.run(_use, f"{base}/mcp"))
        assert httpx.post(f"{base}/v1/retrieve", json={"query": "E102"}).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
