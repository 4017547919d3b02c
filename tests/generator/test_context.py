"""build_context: numbered blocks with source tags, token budget, truncation; detect_language."""

from __future__ import annotations

import pytest

from rag_lab.generator import PROMPTS, build_context
from rag_lab.generator.context import count_tokens
from rag_lab.text.language import detect_language
from rag_lab.text.refusals import REFUSALS
from rag_lab.types import Chunk

META = {
    "source": "hx200.pdf",
    "page": 12,
    "version": "2.1",
    "valid_from": "2023-01-01",
    "valid_to": "2024-12-31",
}
A = Chunk(
    "hx#0",
    "hx",
    "Fault E102 means low oil pressure.",
    0,
    34,
    section="Faults > E102",
    metadata=META,
)
B = Chunk("zh#0", "zh", "故障码E102表示油压过低。", 0, 13)
C = Chunk("c#0", "c", "word " * 50, 0, 250)


def test_blocks_are_numbered_and_tagged_en():
    ctx, used = build_context([A, B], 200, "en")
    assert used == [A, B]
    assert ctx.startswith(
        "[1] doc: hx | section: Faults > E102 | source: hx200.pdf, p. 12 | "
        "version: 2.1 | valid: 2023-01-01 to 2024-12-31\n"
        "Fault E102 means low oil pressure."
    )
    assert "\n\n[2] doc: zh\n故障码E102表示油压过低。" in ctx


def test_chinese_labels_and_open_ended_validity():
    chunk = Chunk("x#0", "x", "正文", 0, 2, metadata={"valid_to": "2025-06-30", "page": 3})
    ctx, _ = build_context([chunk], 100, "zh")
    assert ctx == "[1] 文档: x | 来源: 第3页 | 有效期: 至2025-06-30\n正文"


def test_budget_stops_at_first_chunk_that_does_not_fit():
    full, _ = build_context([A, B], 1000, "en")
    ctx, used = build_context([A, C, B], count_tokens(full), "en")
    assert used == [A]  # C does not fit; B is not squeezed in after it
    assert count_tokens(ctx) <= count_tokens(full)


def test_first_chunk_is_truncated_rather_than_dropped():
    ctx, used = build_context([C], 20, "en")
    assert len(used) == 1 and used[0].text.strip() and len(used[0].text) < len(C.text)
    assert count_tokens(ctx) <= 20 and used[0].end == used[0].start + len(used[0].text)


def test_bad_arguments():
    with pytest.raises(ValueError):
        build_context([A], 0, "en")
    with pytest.raises(ValueError):
        build_context([A], 10, "fr")
    assert build_context([], 10, "en") == ("", [])


@pytest.mark.parametrize(
    "text,lang",
    [
        ("What does E102 mean?", "en"),
        ("E102表示什么？", "zh"),
        ("HX-200 的最高温度是多少", "zh"),
        ("", "en"),
    ],
)
def test_detect_language(text, lang):
    assert detect_language(text) == lang


def test_prompts_carry_the_refusal_string():
    for lang in ("en", "zh"):
        msgs = PROMPTS[lang].messages("q?", "[1] ctx")
        assert REFUSALS[lang] in msgs[0]["content"] and "[1] ctx" in msgs[1]["content"]
