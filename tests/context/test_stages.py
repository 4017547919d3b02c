"""Context stages on hand-built chunks: ordering, near-duplicate removal across versions, the
budget, extractive and LLM distillation (a scripted generator), and their cache."""

from __future__ import annotations

from typing import Any

import pytest

from rag_lab.cache import StageCache
from rag_lab.context import (
    ExtractiveDistiller,
    LLMDistiller,
    NearDuplicateFilter,
    SectionOrder,
    TokenBudget,
)
from rag_lab.context.llm_distill import parse_facts
from rag_lab.errors import ConfigError
from rag_lab.generator import ExtractiveGenerator
from rag_lab.generator._helper import PromptedGenerator
from rag_lab.generator.context import block_tokens, build_context
from rag_lab.types import Chunk
from rag_lab.validate import OptionError


def chunk(cid: str, text: str, **meta: Any) -> Chunk:
    return Chunk(cid, cid.split("#")[0], text, 0, len(text), metadata=meta)


SAFETY = chunk(
    "loto#0", "Lock out the main switch before opening the cabinet.", section_type="safety_warning"
)
FAULT = chunk(
    "hx#1", "E102 means the oil temperature is above 60 ℃.", section_type="troubleshooting"
)
SPEC = chunk("hx#2", "The tank holds 40 L of oil.", section_type="specification")
V1 = chunk(
    "hx200-manual-v1#3",
    "E102 油温过高：油温超过 60 ℃ 时报警，检查冷却器。",
    version="1.0",
    valid_from="2021-01-01",
)
V2 = chunk(
    "hx200-manual-v2#3",
    "E102 油温过高：油温超过 65 ℃ 时报警，检查冷却器。",
    version="2.0",
    valid_from="2023-07-01",
)
OTHER = chunk("sv7#0", "SV0432 表示直流母线过电压。")


def test_order_puts_safety_warnings_first_and_keeps_score_order_otherwise():
    order = SectionOrder()
    assert order.apply("q", [FAULT, SPEC, SAFETY]) == [SAFETY, FAULT, SPEC]
    assert order.apply("q", [SPEC, FAULT]) == [SPEC, FAULT]  # none there: nothing moves
    two = SectionOrder(first=["specification", "safety_warning"])
    assert two.apply("q", [FAULT, SAFETY, SPEC]) == [SPEC, SAFETY, FAULT]


def test_dedupe_keeps_the_newer_version_at_the_better_rank():
    dedupe = NearDuplicateFilter(threshold=0.8)
    # v1 ranked first, v2 third: v2 is kept, in v1's place
    assert dedupe.apply("q", [V1, OTHER, V2]) == [V2, OTHER]
    assert dedupe.apply("q", [V2, V1]) == [V2]
    assert dedupe.stats["dropped"] == 2
    # below the threshold both stay
    assert NearDuplicateFilter(threshold=1.0).apply("q", [V1, V2]) == [V1, V2]
    # without versions the later valid_from wins; without either the better rank
    old = chunk("a#0", V1.text, valid_from="2020-01-01")
    new = chunk("b#0", V1.text, valid_from="2022-01-01")
    assert NearDuplicateFilter().apply("q", [old, new]) == [new]
    plain = chunk("c#0", V1.text)
    assert NearDuplicateFilter().apply("q", [plain, chunk("d#0", V1.text)]) == [plain]
    # version 2.10 is newer than 2.9 (numbers, not strings)
    a, b = chunk("x#0", V1.text, version="2.9"), chunk("y#0", V1.text, version="2.10")
    assert NearDuplicateFilter().apply("q", [a, b]) == [b]
    with pytest.raises(OptionError):
        NearDuplicateFilter(threshold=0)


def test_budget_is_build_contexts_rule():
    budget = 40
    stage = TokenBudget(max_tokens=budget)
    chunks = [FAULT, SPEC, SAFETY]
    assert stage.apply("What does E102 mean?", chunks) == build_context(chunks, budget, "en")[1]
    assert len(stage.apply("What does E102 mean?", chunks)) < 3
    assert block_tokens(stage.apply("q", chunks), "en") <= budget


def test_extractive_distiller_keeps_the_sentences_with_the_querys_terms():
    long = chunk(
        "hx#5",
        "The pump runs at 1450 rpm. E102 means the oil temperature is above 60 ℃. "
        "Check the cooler fan. The paint is blue.",
    )
    stage = ExtractiveDistiller(min_overlap=0.3)
    out = stage.apply("What does fault E102 mean for oil temperature?", [long, SPEC, OTHER])
    # SPEC shares one term of five ("oil": 0.2 < 0.3), the SV0432 chunk none: both dropped
    assert [c.chunk_id for c in out] == ["hx#5"]
    assert out[0].text == "E102 means the oil temperature is above 60 ℃."
    assert out[0].metadata == long.metadata and out[0].doc_id == long.doc_id
    assert block_tokens(out, "en") < block_tokens([long, SPEC, OTHER], "en")
    low = ExtractiveDistiller(min_overlap=0.2).apply("What does fault E102 mean for oil?", [SPEC])
    assert low == [SPEC]  # "oil" is 1 of 4 terms: kept whole (its only sentence)
    # nothing qualifies: the chunks come back unchanged (the distiller alone never refuses)
    assert stage.apply("compressor belt tension", [SPEC]) == [SPEC]
    assert stage.stats["kept_all"] == 1


class Scripted(PromptedGenerator):
    """A model-backed generator whose replies are scripted; records the messages it got."""

    max_context_tokens, language = 1500, None

    def __init__(self, reply: str) -> None:
        self.reply, self.seen = reply, []

    def complete(self, messages: list[dict[str, str]]) -> str:
        self.seen.append(messages)
        return self.reply

    def settings(self) -> dict[str, Any]:
        return {"model": "scripted", "reply": self.reply}


def test_parse_facts_groups_cited_lines_and_drops_uncited_ones():
    reply = "1. E102 is oil over 60 ℃ [1]\n- Tank 40 L [2][1]\nno citation here\nNONE\nbad [7]"
    facts, uncited = parse_facts(reply, 2)
    assert facts == {0: ["E102 is oil over 60 ℃", "Tank 40 L"], 1: ["Tank 40 L"]}
    assert uncited == 2


def test_llm_distiller_replaces_chunks_by_their_cited_facts_and_caches(tmp_path):
    gen = Scripted("E102: oil above 60 ℃ [2]\nPump: 1450 rpm [9]")
    stage = LLMDistiller(gen)
    stage.attach_cache(StageCache(tmp_path).view("generations"))
    out = stage.apply("What does E102 mean?", [SPEC, FAULT])
    assert [(c.chunk_id, c.text) for c in out] == [("hx#1", "E102: oil above 60 ℃")]
    assert "[2]" in gen.seen[0][1]["content"] and "E102 means" in gen.seen[0][1]["content"]
    assert stage.stats["uncited"] == 1 and stage.stats["llm_calls"] == 1
    # the same input again: from the cache, no call
    again = LLMDistiller(gen)
    again.attach_cache(StageCache(tmp_path).view("generations"))
    assert again.apply("What does E102 mean?", [SPEC, FAULT]) == out
    assert len(gen.seen) == 1 and again.stats["llm_cache_hits"] == 1
    # a reply without a cited fact keeps the chunks
    assert LLMDistiller(Scripted("NONE")).apply("q", [SPEC]) == [SPEC]


def test_llm_distiller_needs_an_llm_generator():
    with pytest.raises(ConfigError, match="context.llm_distill.generator"):
        LLMDistiller(None)
    with pytest.raises(ConfigError, match="writes no text"):
        LLMDistiller(ExtractiveGenerator())
