"""Per-query miss reasons, each reproduced on a hand-built run."""

from __future__ import annotations

from rag_lab.metrics.attribution import attribute, attribution_metrics
from rag_lab.types import Chunk, Query


def chunk(cid: str, text: str, start: int = 0) -> Chunk:
    return Chunk(cid, cid.split("#")[0], text, start, start + len(text))


CHUNKS = {
    c.chunk_id: c
    for c in (
        chunk("a#0", "E102 油温过高：冷却器散热片堵塞，"),
        chunk("a#1", "清洗后油温降至 50 ℃。", 20),
        chunk("b#0", "SV0432 直流母线过电压"),
        chunk("c#0", "无关内容 one"),
        chunk("d#0", "无关内容 two"),
    )
}
QRELS = {"q": {"a": 1}}


def reasons(runs, retrievers=("bm25",), answers=(), k=1):
    queries = {"q": Query("q", "E102 油温", {"category": "exact_code", "answers": list(answers)})}
    return attribute(runs, list(retrievers), CHUNKS, QRELS, queries, k)["q"]


def test_document_level_reasons():
    hit = {"bm25": {"q": {"a#0": 2.0, "c#0": 1.0}}}
    assert reasons(hit)["miss_reason"] == "hit"
    below = {"bm25": {"q": {"c#0": 2.0, "a#0": 1.0}}}
    assert reasons(below)["miss_reason"] == "below_k"
    assert reasons({"bm25": {"q": {"c#0": 2.0}}})["miss_reason"] == "not_retrieved"
    # a post-processor removed it, or pushed it down
    dropped = {"bm25": {"q": {"a#0": 2.0, "c#0": 1.0}}, "rules": {"q": {"c#0": 1.0}}}
    assert reasons(dropped)["miss_reason"] == "dropped_by:rules"
    demoted = {"bm25": {"q": {"a#0": 2.0, "c#0": 1.0}}, "rules": {"q": {"c#0": 1.0, "a#0": 0.5}}}
    assert reasons(demoted)["miss_reason"] == "demoted_by:rules"
    # one retriever had it in its top k, fusion did not
    fused = {
        "bm25": {"q": {"a#0": 2.0, "c#0": 1.0}},
        "dense": {"q": {"c#0": 0.9, "d#0": 0.8}},
        "fusion": {"q": {"c#0": 0.9, "d#0": 0.5, "a#0": 0.4}},
    }
    assert reasons(fused, ("bm25", "dense"))["miss_reason"] == "demoted_by:fusion"


def test_evidence_level_reasons():
    run = {"bm25": {"q": {"a#0": 2.0, "c#0": 1.0}}}
    assert reasons(run, answers=["散热片堵塞"])["evidence_miss_reason"] == "evidence_hit"
    assert reasons(run, answers=["降至 50 ℃"])["evidence_miss_reason"] == "evidence_not_retrieved"
    both = {"bm25": {"q": {"a#0": 2.0, "a#1": 1.0}}}
    assert reasons(both, answers=["降至 50 ℃"])["evidence_miss_reason"] == "evidence_below_k"
    # the chunker cut through the answer
    assert reasons(run, answers=["堵塞，清洗后"])["evidence_miss_reason"] == (
        "evidence_split_across_chunks"
    )
    # nowhere in the relevant document: a parser lost it, or the label is wrong
    assert reasons(run, answers=["70 ℃"])["evidence_miss_reason"] == "evidence_not_in_corpus"


def test_counts_overall_and_per_category():
    queries = {"q": Query("q", "x", {"category": "exact_code"})}
    got = attribution_metrics(
        {"q": {"miss_reason": "dropped_by:rules", "evidence_miss_reason": ""}}, queries, 5
    )
    assert got == {
        "misses_at_5/dropped_by/rules": 1.0,
        "by_category/exact_code/misses_at_5/dropped_by/rules": 1.0,
    }


# -- answer side ------------------------------------------------------------------------------
from rag_lab.metrics.attribution import answer_miss_metrics, answer_miss_reason  # noqa: E402

Q = "E102 报警时油温上限是多少？"
GOLD = ["60 ℃"]
EVIDENCE_CTX = "E102 油温过高：油温超过 60 ℃ 时报警，检查冷却器风扇。"
OTHER_CTX = "SV0432 表示直流母线过电压，检查制动电阻。"


def test_answer_hit_and_not_applicable():
    assert answer_miss_reason(Q, "油温超过 60 ℃ 时报警。", GOLD, (), [EVIDENCE_CTX]) == "answer_hit"
    assert answer_miss_reason(Q, "anything", [], (), [EVIDENCE_CTX]) == ""  # no gold answer
    assert answer_miss_reason(Q, "  ", GOLD, (), [EVIDENCE_CTX]) == ""  # no response


def test_evidence_not_in_context():
    reason = answer_miss_reason(Q, "检查制动电阻。", GOLD, (), [OTHER_CTX])
    assert reason == "evidence_not_in_context"
    # retrieved, then removed by a context stage (a distiller kept another sentence)
    reason = answer_miss_reason(
        Q, "检查制动电阻。", GOLD, (), [OTHER_CTX], retrieved=[OTHER_CTX, EVIDENCE_CTX]
    )
    assert reason == "evidence_dropped_by_context"
    # an evidence string counts like the gold answer
    ctx = "E102 的阈值见表 3。"
    assert (
        answer_miss_reason(Q, "不知道。", GOLD, ["阈值见表 3"], [ctx]) != "evidence_not_in_context"
    )


def test_refused_despite_context():
    reason = answer_miss_reason(Q, "根据所给资料无法回答。", GOLD, (), [OTHER_CTX, EVIDENCE_CTX])
    assert reason == "refused_despite_context"


def test_context_not_used():
    # evidence in context 2; the answer quotes context 1 only (no term of context 2 beyond the
    # query's own E102 / 油温)
    reason = answer_miss_reason(
        Q, "SV0432 表示直流母线过电压。", GOLD, (), [OTHER_CTX, EVIDENCE_CTX]
    )
    assert reason == "context_not_used"
    # sharing only query terms with the evidence is still not using it
    assert (
        answer_miss_reason(Q, "E102 油温。", GOLD, (), [OTHER_CTX, EVIDENCE_CTX])
        == "context_not_used"
    )


def test_wrong_despite_context():
    reason = answer_miss_reason(Q, "检查冷却器风扇，上限 65 ℃。", GOLD, (), [EVIDENCE_CTX])
    assert reason == "wrong_despite_context"


def test_answer_miss_counts_per_reason_and_category():
    reasons = {"a": "context_not_used", "b": "answer_hit", "c": "context_not_used", "d": ""}
    m = answer_miss_metrics(reasons, {"a": "exact_code", "c": None})
    assert m["answer_misses/context_not_used"] == 2
    assert m["answer_misses/wrong_despite_context"] == 0  # every reason present, zeros too
    assert m["by_category/exact_code/answer_misses/context_not_used"] == 1
    assert not any("answer_hit" in k for k in m)


def test_fallback_chain_reasons():
    # level 0 (bm25 -> rules) had the gold; the chain answered from a later level without it
    level0 = {"bm25": {"q": {"a#0": 2.0, "c#0": 1.0}}, "rules": {"q": {"a#0": 2.0, "c#0": 1.0}}}
    replaced = {**level0, "fallback": {"q": {"d#0": 3.0}}}
    assert reasons(replaced)["miss_reason"] == "replaced_by:fallback"
    # ... or refused it: an empty run
    refused = {**level0, "fallback": {"q": {}}}
    assert reasons(refused)["miss_reason"] == "refused_by:fallback"
    # level 0 had it below k only; the answering level lacks it: not "not_retrieved"
    below = {"bm25": {"q": {"c#0": 2.0, "a#0": 1.0}}, "fallback": {"q": {"d#0": 3.0}}}
    assert reasons(below)["miss_reason"] == "replaced_by:fallback"
    # answered at level 0 (the chain's run is level 0's): the level-0 reasons stand
    kept = {"bm25": {"q": {"c#0": 2.0, "a#0": 1.0}}, "fallback": {"q": {"c#0": 2.0, "a#0": 1.0}}}
    assert reasons(kept)["miss_reason"] == "below_k"
    # a level-0 stage lost it first: that stage is named, not the chain
    ruled = {**level0, "rules": {"q": {"c#0": 1.0}}, "fallback": {"q": {"d#0": 3.0}}}
    assert reasons(ruled)["miss_reason"] == "dropped_by:rules"
    # no level saw it: still not_retrieved
    none = {"bm25": {"q": {"c#0": 2.0}}, "fallback": {"q": {"d#0": 3.0}}}
    assert reasons(none)["miss_reason"] == "not_retrieved"
    got = attribution_metrics(
        {"q": {"miss_reason": "replaced_by:fallback", "evidence_miss_reason": ""}},
        {"q": Query("q", "x", {"category": "standards"})},
        5,
    )
    assert got["misses_at_5/replaced_by/fallback"] == 1.0
