"""NormaliseQueries: NFKC folding of full-width input, whitespace, ids and order kept."""

from __future__ import annotations

import pytest

from rag_lab.query_transforms import NormaliseQueries, QueryTransform


def test_full_width_and_whitespace_are_folded_and_order_is_kept():
    t = NormaliseQueries()
    assert isinstance(t, QueryTransform)
    out = t.transform({"b": "  ＨＸ－２００\t报警 Ｅ１０２ ", "a": "主轴\n\n温度"})
    assert out == {"b": "HX-200 报警 E102", "a": "主轴 温度"} and list(out) == ["b", "a"]


def test_options():
    kept = NormaliseQueries(form=None, collapse_whitespace=False).transform({"q": "Ａ  b"})
    assert kept == {"q": "Ａ  b"}
    assert NormaliseQueries(lowercase=True).transform({"q": "Pump"}) == {"q": "pump"}
    with pytest.raises(ValueError, match="form must be"):
        NormaliseQueries(form="NFX")
