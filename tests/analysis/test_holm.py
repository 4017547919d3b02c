"""rag_lab.analysis.stats.holm by its definition, written out: the j-th smallest p times (m - j +
1), made monotone and capped at 1."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rag_lab.analysis.stats import holm


def test_holm_known_values() -> None:
    # m = 4: 0.01*4 = 0.04, 0.02*3 = 0.06, 0.03*2 = 0.06, 0.5*1 = 0.5; input order kept
    p = np.array([0.03, 0.01, 0.5, 0.02])
    assert holm(p) == pytest.approx([0.06, 0.04, 0.5, 0.06])


def test_holm_is_monotone_capped_and_skips_nan() -> None:
    p = np.array([0.04, math.nan, 0.045, 0.9])
    out = holm(p)
    assert math.isnan(out[1])
    # m = 3 (NaN not counted): 0.04*3 = 0.12, max(0.12, 0.045*2) = 0.12, max(0.12, 0.9) = 0.9
    assert out[[0, 2, 3]] == pytest.approx([0.12, 0.12, 0.9])
    assert holm(np.array([0.6, 0.7])).tolist() == [1.0, 1.0]
    assert holm(np.array([])).size == 0
