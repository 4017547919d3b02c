"""Answer metrics: SQuAD-style EM/F1 for English, CMRC-style (characters, longest common run) for
Chinese, containment, refusal detection, context utilisation."""

from __future__ import annotations

import pytest

from rag_lab.answer_metrics import (
    answer_contained,
    answer_tokens,
    context_utilisation,
    exact_match,
    is_refusal,
    token_f1,
)
from rag_lab.generator import REFUSALS


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
    assert answer_contained("全长３６４．６公里", "364.6公里") == 1.0  # NFKC folds full-width digits
    assert answer_contained("low pressure", "low oil pressure") == 0.0


def test_is_refusal():
    assert is_refusal(REFUSALS["en"]) and is_refusal(REFUSALS["zh"]) and is_refusal("根据所给资料无法回答")
    assert is_refusal("Sorry: I cannot tell from the provided context")
    assert not is_refusal(f"{REFUSALS['en']} But it is 70 °C.")
    assert not is_refusal("") and not is_refusal("The answer is 70 °C.")


def test_context_utilisation():
    contexts = ["Fault E102 means low oil pressure.", "Replace the seal every 3000 h.", "Unrelated text about bread."]
    assert context_utilisation(["Fault E102 means low oil pressure."], contexts) == pytest.approx(1 / 3)
    assert context_utilisation(["E102 means low oil pressure.", "Replace the seal every 3000 h."],
                               contexts) == pytest.approx(2 / 3)
    assert context_utilisation([], contexts) == 0.0
    assert context_utilisation(["anything"], []) is None
