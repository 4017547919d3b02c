"""Answer metrics: SQuAD-style EM/F1 for English, CMRC-style (characters, longest common run) for
Chinese, containment, refusal detection, context utilisation, aggregation over answers, and the
old module path."""

from __future__ import annotations

import importlib
import math

import pytest

from rag_lab.metrics.answers import (
    aggregate_answers,
    answer_contained,
    answer_tokens,
    context_utilisation,
    exact_match,
    token_f1,
)
from rag_lab.pipeline.answers import score_response
from rag_lab.text.refusals import REFUSALS, is_refusal


def test_squad_normalisation():
    assert answer_tokens("The  Eiffel Tower!", "en") == ["eiffel", "tower"]
    assert exact_match("the eiffel tower.", "Eiffel Tower") == 1.0
    assert exact_match("Eiffel", "Eiffel Tower") == 0.0


def test_english_f1_is_bag_overlap():
    # pred: low oil pressure here (4), gold: low oil pressure (3) -> p 3/4, r 1
    assert token_f1("low oil pressure here", "low oil pressure") == pytest.approx(2 * 0.75 / 1.75)
    assert token_f1("pressure oil low", "low oil pressure") == 1.0  # order does not matter in SQuAD
    assert token_f1("nothing", "low oil pressure") == 0.0


def test_chinese_is_character_level_with_longest_common_run():
    assert answer_tokens("光荣和ω-force。", "zh") == ["光", "荣", "和", "ω", "force"]
    assert exact_match("364.6公里。", "364.6公里") == 1.0
    # CMRC: longest common contiguous run, "油压过低" (4) of pred 6 chars, gold 4 chars
    assert token_f1("表示油压过低", "油压过低") == pytest.approx(2 * (4 / 6) * 1 / (4 / 6 + 1))
    # the same characters out of order share only runs of one
    assert token_f1("低过压油", "油压过低") == pytest.approx(0.25)


def test_best_of_several_golds():
    assert exact_match("村雨城", ["任天堂游戏谜之村雨城", "村雨城"]) == 1.0
    assert token_f1("x", []) == 0.0


def test_answer_contained():
    assert answer_contained("The limit is 8 MPa, per clause 4.2.", "8  mpa") == 1.0
    # NFKC folds full-width digits
    assert answer_contained("全长３６４．６公里", "364.6公里") == 1.0
    assert answer_contained("low pressure", "low oil pressure") == 0.0


def test_is_refusal():
    assert is_refusal(REFUSALS["en"]) and is_refusal(REFUSALS["zh"])
    assert is_refusal("根据所给资料无法回答")
    assert is_refusal("Sorry: I cannot tell from the provided context")
    assert not is_refusal(f"{REFUSALS['en']} But it is 70 °C.")
    assert not is_refusal("") and not is_refusal("The answer is 70 °C.")


def test_context_utilisation():
    contexts = [
        "Fault E102 means low oil pressure.",
        "Replace the seal every 3000 h.",
        "Unrelated text about bread.",
    ]
    used = context_utilisation(["Fault E102 means low oil pressure."], contexts)
    assert used == pytest.approx(1 / 3)
    assert context_utilisation(
        ["E102 means low oil pressure.", "Replace the seal every 3000 h."], contexts
    ) == pytest.approx(2 / 3)
    assert context_utilisation([], contexts) == 0.0
    assert context_utilisation(["anything"], []) is None


def row(faithfulness, refusal=False, **extra):
    return {"faithfulness": faithfulness, "refusal": refusal, "context_utilisation": None, **extra}


def test_aggregate_means_skip_missing_and_never_count_them_as_zero():
    rows = [row(1.0, f1=0.5), row(None, f1=None), row(0.5, f1=1.0)]
    out = aggregate_answers(rows)
    assert out["faithfulness"] == pytest.approx((1.0 + 0.5) / 2)
    assert out["f1"] == pytest.approx((0.5 + 1.0) / 2)
    assert out["n_missing_faithfulness"] == 1.0
    assert math.isnan(out["context_utilisation"])  # no row has it: NaN, not 0
    assert math.isnan(out["exact_match"])
    # judge-only scores appear only when the judge gave them
    assert "context_precision" not in out and "context_recall" not in out
    assert aggregate_answers([row(1.0, context_recall=0.25)])["context_recall"] == 0.25


def test_aggregate_refusal_rates_split_by_answerability_when_known():
    rows = [
        row(1.0, refusal=True, answerable=False),
        row(1.0, refusal=False, answerable=False),
        row(1.0, refusal=True, answerable=True),
        row(1.0, refusal=False, answerable=True),
        row(1.0, refusal=False, answerable=True),
        row(1.0, refusal=False, answerable=True),
    ]
    out = aggregate_answers(rows)
    assert out["refusal_rate_unanswerable"] == 1 / 2
    assert out["wrong_refusal_rate"] == 1 / 4
    assert "refusal_rate" not in out
    # logged answers (rag-lab judge) carry no answerability: one overall rate
    logged = aggregate_answers([{k: v for k, v in r.items() if k != "answerable"} for r in rows])
    assert logged["refusal_rate"] == 2 / 6
    assert "wrong_refusal_rate" not in logged


def test_aggregate_of_scored_responses_matches_their_rows():
    judge = importlib.import_module("rag_lab.judge").LexicalJudge()
    ctx = ["The HX-200 pump runs at 3000 rpm."]
    rows = [
        score_response(judge, "speed?", ctx, "The HX-200 pump runs at 3000 rpm.", "3000 rpm"),
        score_response(judge, "speed?", ctx, REFUSALS["en"], "3000 rpm"),
        score_response(judge, "speed?", ctx, "", None),
    ]
    out = aggregate_answers(rows)
    assert out["faithfulness"] == pytest.approx((rows[0]["faithfulness"] + 1.0) / 2)
    assert out["n_missing_faithfulness"] == 1.0  # the empty response
    assert out["contained"] == pytest.approx((1.0 + 0.0) / 2)  # the third has no reference
    assert out["refusal_rate"] == pytest.approx(1 / 3)


def test_score_response_uses_the_judges_term_analysis():
    """A ``TermAware`` judge's own analysis decides context utilisation (here one term per
    text: the sentence as a whole is not a term of the context)."""
    from rag_lab.text import ContentTerms

    class Fixed:
        """Reports one supported sentence, whatever the input; no term analysis of its own."""

        def judge(self, query, contexts, response, reference=None):
            from rag_lab.judge.base import JudgeResult

            return JudgeResult(1.0, {"supported_sentences": ["pumps overheat"]})

    class FixedWithTerms(Fixed):
        terms = ContentTerms(lambda texts: [[t] for t in texts])

    ctx = ["the pump overheat alarm"]
    default = score_response(Fixed(), "q", ctx, "pumps overheat", None)
    own = score_response(FixedWithTerms(), "q", ctx, "pumps overheat", None)
    assert default["context_utilisation"] == 1.0  # jieba + stemming: pumps -> pump
    assert own["context_utilisation"] == 0.0
