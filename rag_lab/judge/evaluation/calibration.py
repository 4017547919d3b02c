"""Judges measured against human labels: agreement, and prediction-powered faithfulness.

A judge's *score* is its faithfulness in [0, 1]; its *verdict* (faithful or not) is its own when
it gives one (the lexical judge: ``details["faithful"]``, its documented rule), else
``score >= threshold`` (:func:`verdict`). Against 0/1 labels on the same answers:

- :func:`agreement`: accuracy and Cohen's κ of the verdicts (scikit-learn
  ``cohen_kappa_score``), AUROC of the scores (``roc_auc_score``; NaN when the labels hold one
  class), the judged and the labelled share of faithful answers.
- :func:`ppi_faithfulness`: one configuration's faithful share estimated from the judge on all its
  answers, corrected by the labelled ones (``rag_lab.analysis.stats.ppi_mean_ci``, λ = 1): the
  judge's error on the labelled answers (the rectifier) is subtracted from its mean on the others,
  and the CI counts both the labels' sampling noise and the judge's, next to the naive judged mean
  and the labels alone. Answers the judge could not score are left out of both (``n_missing``),
  so the estimate is of the scored answers; the labelled ones must be a random sample of them
  for the correction to be unbiased.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping
from typing import Any, Literal, TypeVar

import numpy as np

from rag_lab.analysis.stats import normal_mean_ci, ppi_mean_ci

K = TypeVar("K", bound=Hashable)

__all__ = ["DEFAULT_THRESHOLD", "agreement", "ppi_faithfulness", "verdict"]

DEFAULT_THRESHOLD = 0.5  # score from which an answer is judged faithful (judges without a verdict)
Predictor = Literal["score", "verdict"]


def _clip(bound: float) -> float:
    """A CI bound of a faithful share, cut to [0, 1] (where the share lies); NaN stays NaN."""
    return bound if math.isnan(bound) else min(1.0, max(0.0, bound))


def verdict(score: float | None, own: Any, threshold: float = DEFAULT_THRESHOLD) -> int | None:
    """1 (faithful) / 0 / None (no score): the judge's ``own`` verdict when it gives one (not
    None), else ``score >= threshold``."""
    if own is not None:
        return int(bool(own))
    return None if score is None else int(score >= threshold)


def _nan_to_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in d.items()}


def agreement(
    labels: Mapping[K, int],
    scores: Mapping[K, float | None],
    verdicts: Mapping[K, int | None],
) -> dict[str, Any]:
    """Agreement of a judge's ``verdicts`` (accuracy, κ) and ``scores`` (AUROC) with ``labels``
    on the items it scored (``n``; ``n_missing``: labelled items the judge did not score). NaN
    values are returned as None (JSON-ready): κ when labels and verdicts are one and the same
    class, AUROC when the labels hold one class, everything when ``n`` is 0."""
    from sklearn.metrics import cohen_kappa_score, roc_auc_score

    both = [k for k in labels if scores.get(k) is not None and verdicts.get(k) is not None]
    y = np.array([labels[k] for k in both], dtype=int)
    s = np.array([scores[k] for k in both], dtype=float)
    v = np.array([verdicts[k] for k in both], dtype=int)
    out: dict[str, Any] = {"n": len(both), "n_missing": len(labels) - len(both)}
    if not both:
        nan = math.nan
        out |= dict(accuracy=nan, kappa=nan, auroc=nan, judged_faithful=nan, labelled_faithful=nan)
        return _nan_to_none(out)
    with warnings.catch_warnings():  # one class on both sides: κ is undefined, said by the NaN
        warnings.simplefilter("ignore")
        kappa = float(cohen_kappa_score(y, v, labels=[0, 1], replace_undefined_by=np.nan))
    auroc = float(roc_auc_score(y, s)) if 0 < y.sum() < y.size else math.nan
    out |= {
        "accuracy": float((v == y).mean()),
        "kappa": kappa,
        "auroc": auroc,
        "judged_faithful": float(v.mean()),
        "labelled_faithful": float(y.mean()),
    }
    return _nan_to_none(out)


def ppi_faithfulness(
    scores: Mapping[K, float | None],
    verdicts: Mapping[K, int | None],
    labels: Mapping[K, int],
    predictor: Predictor = "score",
    alpha: float = 0.05,
) -> dict[str, Any]:
    """One configuration's PPI-corrected faithfulness from the judge's ``scores`` and
    ``verdicts`` on all of its answers (None = missing) and the ``labels`` of some (keys of
    ``scores``). ``predictor``: what stands in for the label, the judge's ``score`` (then
    ``judged`` is the configuration's mean faithfulness, what ``answer/faithfulness`` reports) or
    its 0/1 ``verdict`` (then ``judged`` is its share of answers judged faithful).

    Keys: ``n_answers``, ``n_missing`` (unscored answers, left out), ``n_labelled`` (labelled
    and scored), ``judged`` (the predictor's mean over the scored answers), ``rectifier``
    (mean label − predictor on the labelled answers), ``estimate`` / ``low`` / ``high`` / ``se``
    (the PPI estimate of the faithful share and its ``1 - alpha`` CI), ``labels_only`` /
    ``labels_low`` / ``labels_high`` (the labels' own normal CI). The bounds are cut to [0, 1]
    (a normal interval on few labels can reach past them); NaN → None.

    The estimate is the standard one (``rag_lab.analysis.stats.ppi_mean_ci``): the predictor's mean
    on the
    *unlabelled* answers plus the rectifier, so with every answer labelled it is the labels' mean.
    A rectifier of constant value (the judge agrees with every label, or misses each by the same
    amount) has zero variance: with few labels the interval is then too narrow to trust."""
    if predictor not in ("score", "verdict"):
        raise ValueError(f"predictor must be 'score' or 'verdict', got {predictor!r}")
    scored = {k: float(s) for k, s in scores.items() if s is not None}
    pred = {k: float(verdicts[k] or 0) if predictor == "verdict" else s for k, s in scored.items()}
    lab = [k for k in pred if k in labels]
    y = np.array([labels[k] for k in lab], dtype=float)
    f_lab = np.array([pred[k] for k in lab], dtype=float)
    f_unl = np.array([pred[k] for k in pred if k not in labels], dtype=float)
    est = ppi_mean_ci(y, f_lab, f_unl, alpha=alpha)
    classical = normal_mean_ci(y, alpha=alpha)
    out = {
        "n_answers": len(scores),
        "n_missing": len(scores) - len(scored),
        "n_labelled": len(lab),
        "judged": float(np.mean(list(pred.values()))) if pred else math.nan,
        "rectifier": est.rectifier,
        "estimate": est.estimate,
        "low": _clip(est.low),
        "high": _clip(est.high),
        "se": est.se,
        "labels_only": classical[0],
        "labels_low": _clip(classical[1]),
        "labels_high": _clip(classical[2]),
    }
    return _nan_to_none(out)
