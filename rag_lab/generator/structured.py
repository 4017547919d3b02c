"""A generator asked for JSON that matches a schema: the reply is parsed and validated
(``jsonschema``), a reply that fails is asked for once more with the reason, and a second failure
raises ``InvalidOutputError`` — which sends the query to the next fallback level when the chain
judges answers (``Acceptance.judge``), and otherwise becomes the refusal
(``rag_lab.pipeline.answers``), counted as ``answer/n_invalid_outputs``.

It wraps any generator that reads ``notes`` (``openai``, ``transformers``): the instruction and
the schema go before the context as notes. What it returns — and what is judged — is the
``answer_field`` of the validated object; ``last`` keeps the whole object of the last answer.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_lab.errors import ConfigError, RagLabError
from rag_lab.generator.base import Cacheable, Generator
from rag_lab.text.refusals import is_refusal
from rag_lab.types import Chunk

INSTRUCTION = (
    "Reply with one JSON object only, no other text, that matches this JSON schema: {schema}. "
    "Put the answer to the question in the field {field!r}."
)
RETRY = "Your last reply was not valid: {reason}. Reply again with the JSON object only."
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


class InvalidOutputError(RagLabError):
    """The generator's reply failed the schema twice."""


class StructuredGenerator:
    """Args:
    generator: the generator asked for JSON (built from its own ``_target_``).
    schema: a JSON schema (mapping) or the path of a JSON file holding one.
    answer_field: the string field of the object that is the answer.
    retries: extra requests after an invalid reply (1: retried once).
    """

    def __init__(
        self,
        generator: Generator,
        schema: Mapping[str, Any] | str,
        answer_field: str = "answer",
        retries: int = 1,
    ) -> None:
        import jsonschema

        if isinstance(schema, str):
            path = Path(schema)
            if not path.is_file():
                raise ConfigError(f"generator.schema: no file {path}")
            try:
                schema = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"generator.schema: {path}:{exc.lineno}: {exc.msg}") from None
        self.schema = dict(schema)  # type: ignore[arg-type]
        try:
            jsonschema.Draft202012Validator.check_schema(self.schema)
        except jsonschema.SchemaError as exc:
            raise ConfigError(f"generator.schema: not a JSON schema: {exc.message}") from None
        self.validator = jsonschema.Draft202012Validator(self.schema)
        self.generator, self.answer_field = generator, str(answer_field)
        if int(retries) < 0:
            raise ConfigError(f"generator.retries must be >= 0, got {retries}")
        self.retries = int(retries)
        self.last: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StructuredGenerator({self.generator!r})"

    def _notes(self, notes: Sequence[str]) -> list[str]:
        schema = json.dumps(self.schema, ensure_ascii=False, sort_keys=True)
        return [*notes, INSTRUCTION.format(schema=schema, field=self.answer_field)]

    def check(self, reply: str) -> tuple[dict[str, Any] | None, str]:
        """The reply's object when it is valid JSON matching the schema with a string answer
        field, else None and the reason."""
        body = _FENCE.sub(r"\1", reply.strip())
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as exc:
            return None, f"not JSON ({exc.msg} at character {exc.pos})"
        errors = sorted(self.validator.iter_errors(obj), key=lambda e: list(e.path))
        if errors:
            where = "/".join(str(p) for p in errors[0].path) or "the object"
            return None, f"{where}: {errors[0].message}"
        if not isinstance(obj, dict) or not isinstance(obj.get(self.answer_field), str):
            return None, f"field {self.answer_field!r} must be a string"
        return obj, ""

    def generate(self, query: str, chunks: Sequence[Chunk], notes: Sequence[str] = ()) -> str:
        asked = self._notes(notes)
        reason = ""
        for attempt in range(self.retries + 1):
            extra = [RETRY.format(reason=reason)] if attempt else []
            reply = self.generator.generate(query, chunks, [*asked, *extra])
            if is_refusal(reply):  # no chunks, or the model declined: a refusal is an answer
                return reply
            obj, reason = self.check(reply)
            if obj is not None:
                with self._lock:
                    self.last = obj
                return str(obj[self.answer_field])
        raise InvalidOutputError(
            f"the generator's reply failed the schema {self.retries + 1} time(s): {reason}"
        )

    def request(
        self, query: str, chunks: Sequence[Chunk], notes: Sequence[str] = ()
    ) -> dict[str, Any] | None:
        """The wrapped generator's request with the schema's notes (None when it describes none,
        or needs no model call)."""
        if not isinstance(self.generator, Cacheable):
            return None
        inner = self.generator.request(query, chunks, self._notes(notes))
        if inner is None:
            return None
        return {"structured": {"answer_field": self.answer_field, "retries": self.retries}, **inner}
