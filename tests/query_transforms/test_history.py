"""Follow-up resolution (RuleHistoryRewrite, LLMHistoryRewrite through the fake endpoint): what is
carried from earlier turns, and that each turn is retrieved on its own — turn 2's run is exactly
the run of its rewritten text retrieved alone, whatever ran before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.errors import ConfigError
from rag_lab.pipeline import Pipeline
from rag_lab.pipeline.build import build_dataset, build_pipeline
from rag_lab.protocols import QueryMetadataAware
from rag_lab.query_transforms import LLMHistoryRewrite, QueryTransform, RuleHistoryRewrite
from tests.compose import TOY_OVERRIDES, compose_evaluate
from tests.fake_openai import FakeOpenAI, last_user_text

T1 = "What does E102 mean on the HX-200?"
T2 = "How hot does it get before it stops?"


@pytest.mark.parametrize(
    ("history", "text", "expected"),
    [
        (["E102 是什么"], "它对应哪个手册章节？", "E102 它对应哪个手册章节？"),
        (
            ["HX-200 液压站 E102 是什么"],
            "2024年的停泵温度是多少",
            "HX-200 E102 液压站 2024年的停泵温度是多少",
        ),
        # a follow-up with its own code keeps it; the model is sticky, the old code is not carried
        (["LU-10 E21 压力未建立"], "那 E22 呢", "LU-10 那 E22 呢"),
        # its own component, no pronoun: only the model number comes along
        (
            ["PM-3000 code 0x0102"],
            "How often is the battery replaced?",
            "PM-3000 How often is the battery replaced?",
        ),
        # each kind from the latest turn that has one
        (["SP-45 E012", "CH-30 E210"], "what causes it?", "CH-30 E210 what causes it?"),
        (
            ["PM-3000 0x0102", "replace the battery?"],
            "threshold for it?",
            "PM-3000 0x0102 battery threshold for it?",
        ),
        # full-width input from a Chinese IME counts; nothing to carry: unchanged
        (["ＳＶ０４３２ 报警"], "它的原因", "SV0432 它的原因"),
        (["你好"], "它的原因", "它的原因"),
        ([], "它的原因", "它的原因"),
        # an entity the follow-up already spells is not repeated
        (["HX-200 E102"], "is it the hx-200 pump?", "E102 is it the hx-200 pump?"),
    ],
)
def test_rule_rewrite(history, text, expected):
    assert RuleHistoryRewrite().rewrite(text, history) == expected


def test_rule_rewrite_reads_history_from_query_metadata_and_forgets_it():
    t = RuleHistoryRewrite()
    assert isinstance(t, QueryTransform) and isinstance(t, QueryMetadataAware)
    t.set_query_metadata({"b": {"history": ["E102 是什么"]}, "a": {}})
    out = t.transform({"a": "它呢", "b": "它呢"})
    assert out == {"a": "它呢", "b": "E102 它呢"} and list(out) == ["a", "b"]
    t.set_query_metadata({})
    assert t.transform({"b": "它呢"}) == {"b": "它呢"}


def test_rule_options_are_checked():
    with pytest.raises(ConfigError, match=r"entity_patterns.code: bad regular expression"):
        RuleHistoryRewrite(entity_patterns={"code": "E[0-9"})
    with pytest.raises(ConfigError, match=r"sticky names part, not an entity kind"):
        RuleHistoryRewrite(sticky=["part"])
    own = RuleHistoryRewrite(
        entity_patterns={"code": r"X\d+"}, components=[], sticky=[], pronouns=["that"]
    )
    assert own.rewrite("and that?", ["X12 and E102"]) == "X12 and that?"


def toy_pipeline(tmp_path: Path, *overrides: str) -> Pipeline:
    cfg = compose_evaluate([*TOY_OVERRIDES, "retrievers=[dense,bm25]", *overrides], tmp_path)
    data = build_dataset(cfg).load()
    pipe = build_pipeline(cfg)
    pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    return pipe


def test_turns_are_retrieved_independently_only_the_rewritten_text_differs(tmp_path):
    pipe = toy_pipeline(tmp_path, "cache.dir=null", "query_transforms=[history]")
    plain = toy_pipeline(tmp_path, "cache.dir=null")
    history = {"t2": {"history": [T1]}}
    result = pipe.run({"t1": T1, "t2": T2}, 5, query_metadata=history)
    rewritten = result.queries["t2"]
    assert rewritten == f"HX-200 E102 {T2}" and result.queries["t1"] == T1
    alone = plain.run({"x": rewritten}, 5)
    for stage in ("dense", "bm25", "fusion"):  # every stage's run of turn 2 = the rewrite alone
        assert result.runs[stage]["t2"] == alone.runs[stage]["x"]
    # turn 2 alone, or after other turns, gets the same run: nothing of turn 1's results is used
    assert pipe.run({"t2": T2}, 5, query_metadata=history).final["t2"] == result.final["t2"]
    assert result.final["t2"] != plain.run({"t2": T2}, 5).final["t2"]  # the rewrite matters
    # a later run without history does not keep the earlier run's history
    assert pipe.run({"t2": T2}, 5).final["t2"] == plain.run({"t2": T2}, 5).final["t2"]


def test_llm_rewrite_through_the_fake_endpoint_is_cached(tmp_path):
    seen: list[str] = []

    def reply(body):
        seen.append(last_user_text(body))
        return "Query: HX-200 E102 oil temperature stop limit"

    with FakeOpenAI(reply) as fake:
        args = [
            "query_transforms=[llm_history]",
            "generator=openai",
            f"generator.base_url={fake.url}",
            "generator.model=fake",
            f"cache.dir={tmp_path / 'cache'}",
        ]
        pipe = toy_pipeline(tmp_path, *args)
        history = {"t2": {"history": [T1]}}
        result = pipe.run({"t1": T1, "t2": T2}, 5, query_metadata=history)
        assert result.queries == {"t1": T1, "t2": "HX-200 E102 oil temperature stop limit"}
        assert len(fake.requests) == 1 and T1 in seen[0] and T2 in seen[0]  # first turns: no call
        s = result.stats
        assert (s["llm_history/llm_calls"], s["llm_history/llm_calls_per_query"]) == (1, 0.5)
        assert s["llm_history/tokens_per_query"] == 1  # the fake's usage (1 + 1) over 2 queries
        again = toy_pipeline(tmp_path, *args).run({"t2": T2}, 5, query_metadata=history)
        assert len(fake.requests) == 1 and again.final["t2"] == result.final["t2"]
        assert again.stats["llm_history/llm_cache_hits"] == 1
        assert again.stats["llm_history/llm_calls"] == 0


def test_llm_rewrite_keeps_the_text_on_a_blank_reply(tmp_path):
    with FakeOpenAI(lambda body: "  \n") as fake:
        from rag_lab.generator import OpenAIGenerator

        t = LLMHistoryRewrite(OpenAIGenerator(fake.url, "fake", retries=0))
        assert t.rewrite(T2, [T1]) == T2
