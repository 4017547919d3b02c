"""OpenAIGenerator against a fake OpenAI-compatible server: the request it sends (prompt language,
structured context, sampling settings), the API key (sent, never stored, never in an error),
retries of transient failures, immediate failure on request errors, the unreachable endpoint."""

from __future__ import annotations

import pytest

from rag_lab.errors import ConfigError
from rag_lab.generator import PROMPTS, Generator, OpenAIGenerator
from rag_lab.llm.client import EndpointError, parse_completion
from rag_lab.text.refusals import REFUSALS
from rag_lab.types import Chunk
from tests.fake_openai import FakeOpenAI, completion, free_port_url

EN = Chunk("hx#0", "hx", "Fault E102 means low oil pressure.", 0, 34, section="Faults")
ZH = Chunk("zh#0", "zh", "故障码E102表示油压过低。", 0, 13)
KEY = "sk-test-DO-NOT-LEAK-4242"


def gen(url: str, **kw) -> OpenAIGenerator:
    return OpenAIGenerator(url, "fake-model", **{"backoff": 0.0, **kw})


def test_sends_the_prompt_with_structured_context_and_settings(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAI(lambda body: "  Low oil pressure [1].  ") as fake:
        g = gen(fake.url, temperature=0.0, max_tokens=32)
        assert isinstance(g, Generator)
        assert g.generate("What does E102 mean?", [EN]) == "Low oil pressure [1]."
        assert g.generate("E102表示什么？", [ZH]) == "Low oil pressure [1]."
    en, zh = fake.requests
    assert en["model"] == "fake-model" and en["temperature"] == 0.0 and en["max_tokens"] == 32
    assert en["messages"][0]["content"] == PROMPTS["en"].system
    block = "[1] doc: hx | section: Faults\nFault E102 means low oil pressure."
    assert block in en["messages"][1]["content"]
    assert en["messages"][1]["content"].endswith("Question: What does E102 mean?\nAnswer:")
    assert zh["messages"][0]["content"] == PROMPTS["zh"].system
    assert "[1] 文档: zh" in zh["messages"][1]["content"]
    assert "authorization" not in {h.lower() for h in fake.headers[0]}  # no key set: none sent


def test_no_chunks_refuses_without_a_request():
    with FakeOpenAI(lambda body: "x") as fake:
        assert gen(fake.url).generate("What does E102 mean?", []) == REFUSALS["en"]
        assert gen(fake.url).request("q", []) is None
    assert fake.requests == []


def test_request_is_the_body_sent_and_declares_the_cacheable_capability(monkeypatch):
    """``request`` (``Cacheable``: what the answer stage caches under) is exactly what goes to the
    endpoint, minus the key; the model-free baseline does not declare the capability."""
    from rag_lab.generator import Cacheable, ExtractiveGenerator

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAI(lambda body: "ok") as fake:
        g = gen(fake.url, max_tokens=16)
        described = g.request("What does E102 mean?", [EN])
        g.generate("What does E102 mean?", [EN])
    (sent,) = fake.requests
    assert described is not None
    assert described["messages"] == sent["messages"] and described["max_tokens"] == 16
    assert described["model"] == sent["model"] and described["url"] == g.client.url
    assert isinstance(g, Cacheable) and not isinstance(ExtractiveGenerator(), Cacheable)


def test_api_key_comes_from_the_named_variable_and_is_not_kept(monkeypatch):
    monkeypatch.setenv("MY_LLM_KEY", KEY)
    with FakeOpenAI(lambda body: "ok") as fake:
        g = gen(fake.url, api_key_env="MY_LLM_KEY")
        g.generate("q?", [EN])
    assert fake.headers[0]["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(g) and KEY not in repr(vars(g)) and KEY not in repr(vars(g.client))
    assert KEY not in str(g.request("q?", [EN]))


def test_a_key_pasted_where_the_variable_name_belongs_is_refused_without_echo():
    with pytest.raises(ConfigError) as err:
        OpenAIGenerator("http://127.0.0.1:1/v1", "m", api_key_env=KEY)
    assert KEY not in str(err.value) and "NAME of an environment variable" in str(err.value)


def test_transient_failures_are_retried():
    replies = iter(
        [(500, {"error": "busy"}), (200, "{not json"), (200, {"choices": []}), "Low oil pressure."]
    )
    with FakeOpenAI(lambda body: next(replies)) as fake:
        g = gen(fake.url, retries=3)
        assert g.generate("q?", [EN]) == "Low oil pressure."
    assert len(fake.requests) == 4 and g.client.attempts == 4


def test_retries_spent_raise_naming_the_url():
    with FakeOpenAI(lambda body: (503, "overloaded")) as fake:
        g = gen(fake.url, retries=1)
        with pytest.raises(
            EndpointError, match=r"/v1/chat/completions: HTTP 503: overloaded after 2 attempt"
        ):
            g.generate("q?", [EN])
    assert len(fake.requests) == 2


def test_request_errors_fail_at_once_and_never_echo_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    # a server that echoes the credentials it got in its error body
    with FakeOpenAI(lambda body: (401, f"invalid key Bearer {KEY}")) as fake:
        with pytest.raises(EndpointError) as err:
            gen(fake.url, retries=3).generate("q?", [EN])
    assert len(fake.requests) == 1
    msg = str(err.value)
    assert KEY not in msg and "***" in msg and fake.url in msg and "$OPENAI_API_KEY" in msg


def test_unreachable_endpoint_names_the_url():
    url = free_port_url()
    with pytest.raises(EndpointError) as err:
        gen(url, retries=1).generate("q?", [EN])
    assert f"{url}/chat/completions" in str(err.value) and "cannot connect" in str(err.value)


def test_timeout_is_retried_then_reported():
    with FakeOpenAI(lambda body: ("sleep", 1.0, "late")) as fake:
        with pytest.raises(EndpointError, match="no reply within 0.2 s after 2 attempt"):
            gen(fake.url, retries=1, timeout=0.2).generate("q?", [EN])


@pytest.mark.parametrize(
    "kw", [{"base_url": "localhost:8000"}, {"max_tokens": 0}, {"language": "fr"}, {"timeout": 0}]
)
def test_bad_arguments(kw):
    args = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **kw}
    with pytest.raises((ConfigError, ValueError)):
        OpenAIGenerator(**args)


def test_parse_completion():
    assert parse_completion(completion("hi", "length"))["finish_reason"] == "length"
    for bad in ({}, {"choices": []}, {"choices": [{"message": {"content": None}}]}):
        with pytest.raises((KeyError, IndexError, ValueError)):
            parse_completion(bad)
