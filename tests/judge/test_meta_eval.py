"""AUROC against sklearn; pair construction for the judge meta-evaluation."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from rag_lab.judge.meta import auroc, build_pairs, change_number


@pytest.mark.parametrize("seed", range(5))
def test_auroc_matches_sklearn_with_ties(seed):
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
