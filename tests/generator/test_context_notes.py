"""build_context's notes: rendered before the numbered blocks, charged to the budget; generators
put them in the prompt (and so in the cache key)."""

from __future__ import annotations

from rag_lab.generator.context import block_tokens, build_context, count_tokens
from rag_lab.generator.openai import OpenAIGenerator
from rag_lab.types import Chunk

A = Chunk("hx#0", "hx", "Fault E102 means low oil pressure.", 0, 34)
B = Chunk("zh#0", "zh", "故障码E102表示油压过低。", 0, 13)
NOTE = "sources disagree on the E102 limit: 60 ℃ [1] vs 65 ℃ [2]"


def test_notes_come_first_and_count_against_the_budget():
    ctx, used = build_context([A], 100, "en", notes=[NOTE, "  "])
    assert ctx.startswith(f"Note: {NOTE}\n\n[1] doc: hx")
    assert used == [A]
    zh, _ = build_context([B], 100, "zh", notes=["来源不一致"])
    assert zh.startswith("注意：来源不一致\n\n[1] 文档: zh")
    # the budget that fits the block alone no longer fits it after a note
    exact = block_tokens([A], "en")
    assert build_context([A], exact, "en")[1] == [A]
    cut = build_context([A], exact, "en", notes=["one two three"])[1]
    assert len(cut) == 1 and cut[0].text != A.text  # the first block is cut, not dropped
    assert count_tokens(build_context([A], exact, "en", notes=["one two three"])[0]) <= exact
    # notes that take the whole budget leave no block
    assert build_context([A], 3, "en", notes=["one two three"]) == ("Note: one two three", [])
    assert build_context([A], 100, "en", notes=[]) == build_context([A], 100, "en")


def test_generator_prompt_and_request_carry_the_notes():
    gen = OpenAIGenerator(base_url="http://127.0.0.1:9/v1", model="m")
    plain = gen.request("What is E102?", [A])
    noted = gen.request("What is E102?", [A], [NOTE])
    assert plain is not None and noted is not None
    assert NOTE in noted["messages"][1]["content"]
    assert NOTE not in plain["messages"][1]["content"]
    assert noted != plain  # a different cache key
