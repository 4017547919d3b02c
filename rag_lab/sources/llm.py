"""The LLM router, rules first: a query a rule takes is routed by the rule (no call); the others
are routed by the generator's model, shown each source's description, whose reply names the
sources to search. An unusable reply (no source name in it) searches the rules' default sources.
A line of the reply that copies the prompt's list (a source's description, or ``name:`` and the
start of its description) is not the model's choice: its names do not count. A small model
often echoes the list (SmolLM2-135M did for 10 of the sample's 19 queries), and the echo named
every source it had room to repeat.

The call goes through an LLM generator (``openai``, ``transformers``) like the LLM query
transforms (``rag_lab.query_transforms._helper.LLMStage``): cached in the stage cache
(``generations``), counted (``stats``: ``llm_calls``, ``llm_cache_hits``, tokens, ms)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.errors import ConfigError
from rag_lab.query_transforms._helper import LLMStage, clean_line, messages
from rag_lab.sources.base import DEFAULT_ROUTE, Routing
from rag_lab.sources.rules import RuleRouter
from rag_lab.validate import OptionError

LLM_ROUTE = "llm"  # the route of a query the model routed
UNPARSED_ROUTE = "llm_unparsed"  # the model's reply named no source: the default sources
_ECHO_OPENING = 24  # characters of a description whose copy in a reply marks an echoed line
_ECHO_MIN = 12  # shorter descriptions are matched only as ``name: description``

SYSTEM = (
    "You route questions from a maintenance shop floor to the knowledge sources that can answer "
    "them. Reply with the names of the sources to search, comma-separated, and nothing else."
)
USER = "Sources:\n{sources}\n\nQuestion: {query}\n\nSources to search:"


class LLMRouter(LLMStage):
    """Args:
    generator: an LLM generator (``openai``, ``transformers``).
    descriptions: source name → what it holds (shown to the model; every source the model may
        name).
    rules, default, combine, ignore_case: the rules tried first (``RuleRouter``'s arguments); a
        query no rule takes is asked of the model, and ``default`` is what an unusable reply
        searches (``null``: every source).
    max_tokens: cap on the reply.
    """

    name = "llm_router"

    def __init__(
        self,
        generator: Any,
        descriptions: Mapping[str, str],
        rules: Mapping[str, Mapping[str, Any]] | None = None,
        default: Sequence[str] | None = None,
        combine: str = "first",
        ignore_case: bool = True,
        max_tokens: int = 32,
    ) -> None:
        try:
            super().__init__(generator, max_tokens, self.name)
        except ConfigError as exc:  # the helper names a query transform's key: name ours
            raise ConfigError(
                str(exc).replace(f"query_transforms.{self.name}.", "sources.")
            ) from None
        if not isinstance(descriptions, Mapping) or not descriptions:
            raise OptionError(
                "descriptions", descriptions, "must map source names to a description"
            )
        self.descriptions = {str(k): str(v) for k, v in descriptions.items()}
        self.rules = RuleRouter(rules, default, combine, ignore_case)

    def names(self) -> set[str]:
        return set(self.descriptions) | self.rules.names()

    def routes(self) -> set[str]:
        return self.rules.routes() | {LLM_ROUTE, UNPARSED_ROUTE}

    def route(self, text: str, metadata: Mapping[str, Any], sources: Sequence[str]) -> Routing:
        first = self.rules.route(text, metadata, sources)
        if first.route != DEFAULT_ROUTE:
            return first
        self.saw({text: text})
        shown = "\n".join(f"- {s}: {self.descriptions.get(s, s)}" for s in sources)
        reply = self.ask(messages(SYSTEM, USER.format(sources=shown, query=text)))
        chosen = "\n".join(line for line in reply.splitlines() if not self._echoes(line, sources))
        words = {w.lower() for w in re.findall(r"[\w-]+", chosen)}
        picked = tuple(s for s in sources if s.lower() in words)
        return Routing(LLM_ROUTE, picked) if picked else Routing(UNPARSED_ROUTE, first.sources)

    def _echoes(self, line: str, sources: Sequence[str]) -> bool:
        """Whether ``line`` copies the list shown to the model: it holds the opening of a
        source's description (its first 24 characters; descriptions of 12 or more), or is
        ``name: `` followed by the start of that name's description (a copy cut short)."""
        said = " ".join(clean_line(line).lower().split())
        for name in sources:
            desc = " ".join(self.descriptions.get(name, "").lower().split())
            if not desc:
                continue
            if len(desc) >= _ECHO_MIN and desc[:_ECHO_OPENING] in said:
                return True
            label = f"{name.lower()}:"
            rest = said[len(label) :].strip() if said.startswith(label) else ""
            if rest and desc.startswith(rest):
                return True
        return False
