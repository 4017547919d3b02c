"""Judges against labels: agreement (accuracy, κ, AUROC) and PPI-corrected faithfulness of one
configuration, with expected values written as formulas."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lab.analysis.stats import normal_mean_ci, ppi_mean_ci
from rag_lab.judge.evaluation.calibration import agreement, ppi_faithfulness, verdict


def verdicts(scores, threshold=0.5):
    return {k: verdict(s, None, threshold) for k, s in scores.items()}


def test_verdict_is_the_judges_own_else_the_threshold():
    assert verdict(0.9, None) == 1 and verdict(0.4, None) == 0 and verdict(0.5, None) == 1
    assert verdict(0.9, False) == 0 and verdict(0.2, True) == 1  # the judge's rule wins
    assert verdict(None, None) is None
    assert verdict(0.7, None, threshold=0.8) == 0


def test_agreement_accuracy_kappa_auroc():
    labels = {"a": 1, "b": 0, "c": 1, "d": 0, "e": 1}
    scores = {"a": 0.9, "b": 0.6, "c": 0.4, "d": 0.1, "e": None}
    a = agreement(labels, scores, verdicts(scores))
    # verdicts a=1 b=1 c=0 d=0 against labels 1 0 1 0: 2 of 4 right; p_o = p_e = 0.5 so κ = 0
    assert (a["n"], a["n_missing"]) == (4, 1)
    assert a["accuracy"] == 0.5 and a["kappa"] == pytest.approx(0.0)
    # positive-negative pairs ranked right: (a,b) (a,d) (c,d), not (c,b): 3 of 4
    assert a["auroc"] == 0.75
    assert a["judged_faithful"] == 0.5 and a["labelled_faithful"] == 0.5
    # perfect verdicts: κ = 1
    good = {"a": 0.9, "b": 0.2, "c": 0.7, "d": 0.1, "e": 0.8}
    assert agreement(labels, good, verdicts(good))["kappa"] == pytest.approx(1.0)


def test_agreement_undefined_values_are_none():
    labels = {"a": 1, "b": 1}
    scores = {"a": 0.9, "b": 0.8}
    a = agreement(labels, scores, verdicts(scores))
    assert a["accuracy"] == 1.0 and a["auroc"] is None and a["kappa"] is None
    empty = agreement(labels, {"a": None}, {"a": None})
    assert empty["n"] == 0 and empty["n_missing"] == 2 and empty["accuracy"] is None


def test_ppi_faithfulness_is_the_ppi_mean_of_the_scored_answers():
    scores = {1: 1.0, 2: 0.5, 3: 0.0, 4: 1.0, 5: None, 6: 0.8, 7: 0.9}
    labels = {1: 1, 2: 0, 3: 0, 5: 1, 7: 1}  # 5 is labelled but unscored: left out
    out = ppi_faithfulness(scores, verdicts(scores), labels)
    y = np.array([1, 0, 0, 1.0])
    f = np.array([1.0, 0.5, 0.0, 0.9])
    fu = np.array([1.0, 0.8])
    ref = ppi_mean_ci(y, f, fu)
    assert (out["n_answers"], out["n_missing"], out["n_labelled"]) == (7, 1, 4)
    assert out["judged"] == pytest.approx(np.mean([1.0, 0.5, 0.0, 1.0, 0.8, 0.9]))
    assert out["rectifier"] == pytest.approx(np.mean(y - f))
    assert out["estimate"] == pytest.approx(fu.mean() + np.mean(y - f)) == ref.estimate
    # bounds cut to [0, 1], where a faithful share lies (4 labels give a wide interval)
    assert (out["low"], out["high"]) == pytest.approx((max(ref.low, 0), min(ref.high, 1)))
    mean, low, high = normal_mean_ci(y)
    assert low < 0 and high > 1
    assert (out["labels_only"], out["labels_low"], out["labels_high"]) == (mean, 0.0, 1.0)
    # the verdict as predictor: 0/1 stands in for the label
    v = ppi_faithfulness(scores, verdicts(scores), labels, predictor="verdict")
    fv = np.array([1, 1, 0, 1.0])
    assert v["judged"] == pytest.approx(5 / 6)
    assert v["estimate"] == pytest.approx(1.0 + np.mean(y - fv))
    with pytest.raises(ValueError, match="predictor"):
        ppi_faithfulness(scores, verdicts(scores), labels, predictor="mean")


def test_no_labels_gives_the_judged_mean_and_no_interval():
    scores = {1: 1.0, 2: 0.5}
    out = ppi_faithfulness(scores, verdicts(scores), {})
    assert out["judged"] == 0.75 and out["n_labelled"] == 0
    assert out["estimate"] is None and out["low"] is None and out["labels_only"] is None
