"""A fake OpenAI-compatible chat-completions server for tests: runs in a thread on a free localhost
port, records every request, and answers through a function of the request body.

``reply(body) -> str | (status, payload) | Exception-free sentinel``: a string becomes the
assistant message of a normal completion; a ``(status, payload)`` pair is sent as is (``payload``
a dict is JSON-encoded, a str is sent raw); ``("sleep", seconds, text)`` answers ``text`` late.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], Any]


def completion(text: str, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class FakeOpenAI:
    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: Any) -> None:
                data = (
                    payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                )
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out
                    pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with outer._lock:
                    outer.requests.append(body)
                    outer.headers.append(
                        {k.lower(): v for k, v in self.headers.items()}
                    )  # names are case-insensitive
                out = outer.reply(body)
                if isinstance(out, tuple) and out[0] == "sleep":
                    time.sleep(out[1])
                    out = out[2]
                if isinstance(out, str):
                    self._send(200, completion(out))
                else:
                    self._send(*out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *a: None  # type: ignore[method-assign]  # clients that timed out
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def last_user_text(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


def free_port_url() -> str:
    """A localhost URL nothing listens on (a port just released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


GENERATOR_SYSTEM = ("You answer questions", "你负责回答")


def _input_block(text: str) -> dict[str, Any]:
    """The JSON after the last ``input:`` of a ragas prompt."""
    return json.loads(text.rsplit("input: ", 1)[1].rsplit("Output: ", 1)[0])


def ragas_like(text: str, answer: str = "Fault E102 means low oil pressure [1].") -> Any:
    """What a well-behaved model would reply to rag_lab's generator prompt (``answer``) and to
    ragas' prompts (deterministic verdicts: a statement is supported when it occurs verbatim,
    case-folded and without its final period, in the context). A response containing ``MALFORMED``
    gets a reply that is not JSON; one containing ``SLOW`` is answered after 3 s."""
    if "The output string did not satisfy the constraints" in text:
        return "still not json"
    if "Break down each sentence" in text:
        inp = _input_block(text)
        if "MALFORMED" in inp["answer"]:
            return "Sure! Here are the statements: one, two."
        if "SLOW" in inp["answer"]:
            return ("sleep", 3.0, json.dumps({"statements": [inp["answer"]]}))
        sentences = [s.strip() for s in inp["answer"].replace("!", ".").split(".") if s.strip()]
        return json.dumps({"statements": sentences})
    if "judge the faithfulness of a series of statements" in text:
        inp = _input_block(text)
        ctx = inp["context"].lower()
        return json.dumps(
            {
                "statements": [
                    {"statement": s, "reason": "r", "verdict": int(s.lower().rstrip(".") in ctx)}
                    for s in inp["statements"]
                ]
            }
        )
    if "verify if the context was useful" in text:
        inp = _input_block(text)
        return json.dumps(
            {"reason": "r", "verdict": int(inp["answer"].lower() in inp["context"].lower())}
        )
    if "can be attributed to the given context" in text:
        inp = _input_block(text)
        return json.dumps(
            {
                "classifications": [
                    {
                        "statement": inp["answer"],
                        "reason": "r",
                        "attributed": int(inp["answer"].lower() in inp["context"].lower()),
                    }
                ]
            }
        )
    return answer


def route(body: dict[str, Any], answer: str = "Fault E102 means low oil pressure [1].") -> Any:
    """``ragas_like`` on a request body: the generator's prompt gets ``answer``."""
    if str(body["messages"][0]["content"]).startswith(GENERATOR_SYSTEM):
        return answer
    return ragas_like(last_user_text(body), answer)
