"""ExtractiveGenerator: top overlapping sentences in reading order, refusal below min_overlap."""

from __future__ import annotations

import pytest

from rag_lab.generator import ExtractiveGenerator, Generator
from rag_lab.text.refusals import REFUSALS
from rag_lab.types import Chunk

EN = Chunk(
    "hx#0",
    "hx",
    "The HX-200 pump runs at 70 °C maximum. Replace the seal every 3000 h. "
    "Fault E102 means low oil pressure! Check the oil pump first?",
    0,
    100,
)
ZH = Chunk("zh#0", "zh", "故障码E102表示油压过低。请先检查油泵；最高温度为70 °C。", 0, 30)


@pytest.fixture(scope="module")
def gen():
    return ExtractiveGenerator()


def test_is_a_generator(gen):
    assert isinstance(gen, Generator)


def test_english_answer_is_the_best_sentence(gen):
    assert (
        ExtractiveGenerator(max_sentences=1).generate("What does fault E102 mean?", [EN])
        == "Fault E102 means low oil pressure!"
    )


def test_sentences_come_back_in_reading_order(gen):
    out = gen.generate("oil pump pressure", [EN])
    assert out == "Fault E102 means low oil pressure! Check the oil pump first?"


def test_chinese_answer(gen):
    out = ExtractiveGenerator(max_sentences=1).generate("故障码E102表示什么？", [EN, ZH])
    assert out == "故障码E102表示油压过低。"


def test_refuses_in_the_query_language(gen):
    assert gen.generate("How do I bake bread?", [EN, ZH]) == REFUSALS["en"]
    assert gen.generate("如何烤面包？", [EN, ZH]) == REFUSALS["zh"]
    assert gen.generate("What does E102 mean?", []) == REFUSALS["en"]


def test_duplicate_sentences_from_overlapping_chunks_are_dropped(gen):
    dup = Chunk("hx#1", "hx", "Fault E102 means low oil pressure!", 60, 94)
    out = gen.generate("What does fault E102 mean?", [EN, dup])
    assert out.count("Fault E102 means") == 1


def test_context_budget_limits_what_is_read():
    gen = ExtractiveGenerator(max_context_tokens=12)
    assert "E102" not in gen.generate("What does fault E102 mean?", [EN])


def test_deterministic(gen):
    first = gen.generate("oil pump pressure", [EN, ZH])
    assert gen.generate("oil pump pressure", [EN, ZH]) == first


@pytest.mark.parametrize("kw", [{"max_sentences": 0}, {"min_overlap": 0.0}, {"min_overlap": 1.5}])
def test_bad_arguments(kw):
    with pytest.raises(ValueError):
        ExtractiveGenerator(**kw)


def test_conf_option_instantiates_with_the_top_level_tokenizer(tmp_path):
    from rag_lab.pipeline.build import instantiate
    from tests.compose import TOY, compose_evaluate

    cfg = compose_evaluate(
        ["generator=extractive", "dataset=beir", f"dataset.path={TOY}", "tokenizer=jieba"], tmp_path
    )
    gen = instantiate(cfg.generator, "generator")
    assert isinstance(gen, ExtractiveGenerator) and gen.max_sentences == 2
    assert gen.generate("What does fault E102 mean?", [EN]).startswith("Fault E102")
