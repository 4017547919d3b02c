"""``rag-lab serve`` as an operator starts it: uvicorn on a free loopback port, a body over the
limit answered 413 before it is sent, two worker processes, and the refusals in one line."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.cli.helpers import ENV, cli, error_line


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, export, *extra: str) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rag_lab.cli",
                "serve",
                str(export),
                "--port",
                str(self.port),
                *extra,
            ],
            env=dict(ENV),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{self.base}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(self.proc.communicate())
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def test_a_huge_body_is_refused_before_it_is_sent(production_export):
    server = Server(production_export)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(
                b"POST /v1/retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 104857600\r\n\r\n" + b"{" * 1000
            )
            reply = b""  # answered with 99.99 MB still unsent; head and body may come apart
            while b'"too_large"' not in reply and (chunk := s.recv(4096)):
                reply += chunk
            reply = reply.decode()
        assert reply.startswith("HTTP/1.1 413") and '"too_large"' in reply
        r = httpx.post(f"{server.base}/v1/retrieve", json={"query": "E102", "k": 2})
        assert r.status_code == 200 and len(r.json()["hits"]) == 2
    finally:
        server.stop()


@pytest.mark.timeout(600)
def test_two_worker_processes_answer_alike(production_export):
    server = Server(production_export, "--workers", "2")
    try:
        replies = [
            httpx.post(f"{server.base}/v1/retrieve", json={"query": "E102 报警", "k": 3}).json()
            for _ in range(6)
        ]
        assert all(r["hits"] == replies[0]["hits"] for r in replies)
    finally:
        server.stop()


def test_an_exposed_address_without_a_token_is_refused_in_one_line(production_export):
    proc = cli("serve", str(production_export), "--host", "0.0.0.0")
    assert proc.returncode == 2 and "not a loopback address" in error_line(proc)


def test_a_folder_that_is_not_an_export_is_refused_in_one_line(tmp_path):
    proc = cli("serve", str(tmp_path / "missing"))
    assert proc.returncode == 2 and "not a rag_lab export folder" in error_line(proc)
