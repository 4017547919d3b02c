"""``rag_lab.llm.server`` (FastAPI on uvicorn) in-process with a stand-in model: the OpenAI routes
and reply shape, errors in OpenAI's shape, the request checks, the optional bearer key, server
errors (retried by the client), the endpoint generator and the openai SDK talking to it."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from rag_lab.generator import OpenAIGenerator
from rag_lab.generator.transformers import ChatOutput
from rag_lab.llm.client import EndpointError
from rag_lab.llm.server import BadRequest, parse_request, serve
from rag_lab.types import Chunk

EN = Chunk("hx#0", "hx", "Fault E102 means low oil pressure.", 0, 34)


class Echo:
    """Replies with the last message's first word; ``boom`` in it raises."""

    def __init__(self):
        self.calls = []

    def chat(self, messages, max_new_tokens=None, temperature=None, stop=()):
        self.calls.append(
            {
                "messages": messages,
                "max_new_tokens": max_new_tokens,
                "temperature": temperature,
                "stop": list(stop),
            }
        )
        text = messages[-1]["content"]
        if "boom" in text:
            raise RuntimeError("boom")
        return ChatOutput(text.split()[0], "stop", len(text.split()), 1, 0.01)


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("SERVER_KEY", "")
    model = Echo()
    srv = serve(model, "echo", port=0, max_tokens=7, api_key_env="SERVER_KEY")
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", model
    srv.shutdown()
    srv.server_close()


def call(url, body=None, headers=None):
    req = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_routes_and_reply_shape(server):
    base, model = server
    assert call(f"{base}/health") == (200, {"status": "ok", "model": "echo"})
    status, models = call(f"{base}/v1/models")
    assert status == 200 and models["data"][0]["id"] == "echo"
    status, out = call(
        f"{base}/v1/chat/completions",
        {
            "model": "anything",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hello there"}]}],
            "temperature": 0.5,
            "stop": "x",
        },
    )
    assert status == 200 and out["object"] == "chat.completion" and out["model"] == "echo"
    assert out["choices"][0] == {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": "hello"},
    }
    assert out["usage"] == {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}
    assert model.calls[0] == {
        "messages": [{"role": "user", "content": "hello there"}],
        "max_new_tokens": 7,
        "temperature": 0.5,
        "stop": ["x"],
    }
    assert call(f"{base}/v1/nothing")[0] == 404


def test_routes_errors_and_bodies_as_the_stdlib_server_had_them(server):
    base, model = server
    assert call(f"{base}/health/") == (200, {"status": "ok", "model": "echo"})  # no redirect
    assert call(f"{base}/v1/health")[0] == 200
    status, out = call(f"{base}/v1/chat/completions")  # GET on the POST route
    assert status == 404 and out["error"] == {
        "message": "no route GET /v1/chat/completions",
        "type": "invalid_request_error",
        "code": 404,
    }
    for raw, message in ((b"{not json", "Expecting"), (b"", "must be a JSON object")):
        req = urllib.request.Request(f"{base}/v1/chat/completions", data=raw, method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 400 and message in json.loads(err.value.read())["error"]["message"]
    status, out = call(
        f"{base}/v1/chat/completions", {"messages": [{"role": "user", "content": "你好 世界"}]}
    )
    assert status == 200 and out["choices"][0]["message"]["content"] == "你好"
    assert model.calls == [
        {
            "messages": [{"role": "user", "content": "你好 世界"}],
            "max_new_tokens": 7,
            "temperature": 0.0,
            "stop": [],
        }
    ]


def test_the_openai_sdk_talks_to_it(server):
    import openai

    base, _ = server
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    out = client.chat.completions.create(
        model="x", messages=[{"role": "user", "content": "ping pong"}], max_tokens=3
    )
    assert out.choices[0].message.content == "ping" and out.usage.total_tokens == 3
    assert [m.id for m in client.models.list()] == ["echo"]


def test_a_taken_port_fails_when_binding(server):
    port = int(server[0].rsplit(":", 1)[1])
    with pytest.raises(OSError):
        serve(Echo(), "echo", port=port)


@pytest.mark.parametrize(
    "body,message",
    [
        ({"messages": []}, "non-empty list"),
        ({"messages": [{"content": "x"}]}, "'role'"),
        ({"messages": [{"role": "user", "content": "x"}], "stream": True}, "stream"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, "n=1"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, "temperature"),
    ],
)
def test_bad_requests_are_400(server, body, message):
    status, out = call(f"{server[0]}/v1/chat/completions", body)
    assert status == 400 and message in out["error"]["message"]
    with pytest.raises(BadRequest):
        parse_request(body, 8, 0.0)


def test_model_errors_are_500_and_the_client_retries(server):
    base, model = server
    g = OpenAIGenerator(f"{base}/v1", "echo", retries=1, backoff=0)
    with pytest.raises(EndpointError, match="HTTP 500.*generation failed: RuntimeError: boom"):
        g.client.complete([{"role": "user", "content": "boom"}])
    assert len(model.calls) == 2


def test_the_endpoint_generator_talks_to_it(server):
    base, model = server
    gen = OpenAIGenerator(f"{base}/v1", "echo", max_tokens=9)
    answer = gen.generate("What does E102 mean?", [EN])
    assert answer == "Context:" and model.calls[-1]["max_new_tokens"] == 9


def test_bearer_key_when_configured(server, monkeypatch):
    base, _ = server
    monkeypatch.setenv("SERVER_KEY", "local-secret")
    assert call(f"{base}/v1/models")[0] == 401
    assert call(f"{base}/v1/models", headers={"Authorization": "Bearer local-secret"})[0] == 200
    monkeypatch.setenv("CLIENT_KEY", "wrong")
    with pytest.raises(EndpointError, match=r"HTTP 401.*\$CLIENT_KEY"):
        OpenAIGenerator(f"{base}/v1", "echo", api_key_env="CLIENT_KEY").generate("q?", [EN])
    monkeypatch.setenv("CLIENT_KEY", "local-secret")
    gen = OpenAIGenerator(f"{base}/v1", "echo", api_key_env="CLIENT_KEY")
    assert gen.generate("q?", [EN]) == "Context:"
