"""Parser-quality metrics: expected values written as formulas."""

from __future__ import annotations

import pytest

from rag_lab.metrics.parsing import best_cell_accuracy, cell_accuracy, character_error_rate

TRUTH = [["参数", "数值"], ["额定压力", "16 MPa"], ["油温", "≤ 55 ℃"]]


def test_cell_accuracy_counts_cells_at_their_position():
    assert cell_accuracy(TRUTH, TRUTH) == 1.0
    one_wrong = [["参数", "数值"], ["额定压力", "18 MPa"], ["油温", "≤ 55 ℃"]]
    assert cell_accuracy(TRUTH, one_wrong) == pytest.approx(5 / 6)
    assert cell_accuracy(TRUTH, TRUTH[:2]) == pytest.approx(4 / 6)  # a lost row
    shifted = [["参数"], ["额定压力"], ["油温"]]  # a lost column
    assert cell_accuracy(TRUTH, shifted) == pytest.approx(3 / 6)
    # layout is not content: line breaks in a cell, full-width forms (NFKC)
    assert cell_accuracy([["16 MPa（160 bar）"]], [["16  MPa\n(160 bar)"]]) == 1.0
    assert best_cell_accuracy(TRUTH, [one_wrong, TRUTH]) == 1.0
    assert best_cell_accuracy(TRUTH, []) == 0.0


def test_character_error_rate_is_edit_distance_over_reference_length():
    ref = "油温过高：70 ℃ 停泵"  # 10 characters without whitespace (℃ is °C under NFKC)
    n = len("".join(ref.replace("℃", "°C").split()))
    assert character_error_rate(ref, ref) == 0.0
    assert character_error_rate(ref, "油 温 过 高：70 ℃ 停泵") == 0.0  # OCR's CJK spacing
    assert character_error_rate(ref, "油温过商：70 ℃ 停泵") == pytest.approx(1 / n)  # one swap
    assert character_error_rate(ref, "油温过高：70 ℃") == pytest.approx(2 / n)  # two lost
    assert character_error_rate("", "") == 0.0 and character_error_rate("", "x") == 1.0
