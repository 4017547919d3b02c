"""``generator=structured``: JSON that matches a schema, asked of a real endpoint generator talking
to the project's local LLM server (``rag_lab.llm.server`` with a scripted stand-in model): a valid
reply (fenced or not) gives its answer field, an invalid one is asked for once more with the reason,
a second failure raises ``InvalidOutputError``; the schema and the retry are in the prompt and the
cache key; a bad schema is a one-line ``ConfigError``."""

from __future__ import annotations

import json
import threading

import pytest

from rag_lab.errors import ConfigError
from rag_lab.generator import InvalidOutputError, OpenAIGenerator, StructuredGenerator
from rag_lab.generator.transformers import ChatOutput
from rag_lab.llm.server import serve
from rag_lab.types import Chunk

EN = Chunk("hx#0", "hx", "Fault E102 means low oil pressure.", 0, 34)
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "minLength": 1}, "sources": {"type": "array"}},
    "required": ["answer"],
}


class Scripted:
    """Replies with the next scripted text; records every prompt."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.prompts = list(replies), []

    def chat(self, messages, max_new_tokens=None, temperature=None, stop=()):
        self.prompts.append(messages[-1]["content"])
        text = self.replies.pop(0)
        return ChatOutput(text, "stop", 5, 5, 0.01)


@pytest.fixture
def endpoint():
    servers = []

    def start(replies: list[str]) -> tuple[StructuredGenerator, Scripted]:
        model = Scripted(replies)
        srv = serve(model, "scripted", port=0)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        inner = OpenAIGenerator(base_url=url, model="scripted", retries=0, api_key_env=None)
        return StructuredGenerator(inner, SCHEMA), model

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_a_valid_reply_gives_its_answer_field(endpoint):
    gen, model = endpoint(
        ['```json\n{"answer": "E102 means low oil pressure.", "sources": ["hx#0"]}\n```']
    )
    assert gen.generate("What is E102?", [EN]) == "E102 means low oil pressure."
    assert gen.last == {"answer": "E102 means low oil pressure.", "sources": ["hx#0"]}
    # the instruction and the schema reach the model before the context
    assert len(model.prompts) == 1 and '"required": ["answer"]' in model.prompts[0]
    assert model.prompts[0].index("JSON") < model.prompts[0].index("low oil pressure")


def test_an_invalid_reply_is_retried_once_with_the_reason(endpoint):
    gen, model = endpoint(['{"answer": ""}', '{"answer": "Low oil pressure."}'])
    assert gen.generate("What is E102?", [EN]) == "Low oil pressure."
    assert len(model.prompts) == 2
    assert "not valid" not in model.prompts[0]
    assert "Your last reply was not valid: answer:" in model.prompts[1]  # names the field


def test_two_invalid_replies_raise(endpoint):
    gen, model = endpoint(["Sure! E102 is low oil pressure.", '{"result": "low"}', "unused"])
    with pytest.raises(InvalidOutputError, match=r"failed the schema 2 time\(s\): .*'answer'"):
        gen.generate("What is E102?", [EN])
    assert len(model.prompts) == 2  # retried once, not more
    assert "not JSON" in model.prompts[1]


def test_no_chunks_is_the_refusal_without_a_call(endpoint):
    gen, model = endpoint([])
    reply = gen.generate("What is E102?", [])
    assert reply and not model.prompts and gen.request("What is E102?", []) is None


def test_the_schema_keys_the_cache(endpoint):
    gen, _ = endpoint([])
    inner = gen.generator
    plain = inner.request("What is E102?", [EN])
    asked = gen.request("What is E102?", [EN])
    assert asked is not None and plain is not None and asked != plain
    other = StructuredGenerator(inner, {**SCHEMA, "required": ["answer", "sources"]})
    assert other.request("What is E102?", [EN]) != asked


def test_bad_schemas_are_one_line_errors(tmp_path):
    inner = OpenAIGenerator(base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(ConfigError, match=r"generator.schema: no file"):
        StructuredGenerator(inner, str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "object",\n "required": [}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad.json:2: "):
        StructuredGenerator(inner, str(bad))
    with pytest.raises(ConfigError, match=r"not a JSON schema"):
        StructuredGenerator(inner, {"type": "objekt"})
    good = tmp_path / "good.json"
    good.write_text(json.dumps(SCHEMA), encoding="utf-8")
    assert StructuredGenerator(inner, str(good)).schema == SCHEMA
