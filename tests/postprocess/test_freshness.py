"""FreshnessFilter by hand-made chunks: open-ended windows, drop vs demote, bad dates."""

from __future__ import annotations

import pytest

from rag_lab.errors import ConfigError
from rag_lab.postprocess import FreshnessFilter, PostProcessor
from rag_lab.ranking import ranked
from rag_lab.types import Chunk


def chunk(cid: str, valid_from: str | None, valid_to: str | None) -> Chunk:
    return Chunk(
        cid,
        cid.split("#")[0],
        "text",
        0,
        4,
        metadata={"valid_from": valid_from, "valid_to": valid_to},
    )


CHUNKS = {
    c.chunk_id: c
    for c in [
        chunk("old#0", "2021-01-01", "2023-06-30"),  # expired on 2024-01-01
        chunk("new#0", "2023-07-01", None),  # valid, open-ended
        chunk("future#0", "2025-01-01", None),  # not yet valid
        chunk("any#0", None, None),  # no window: always valid
    ]
}
RUN = {"q": {"old#0": 4.0, "new#0": 3.0, "future#0": 2.0, "any#0": 1.0}}


def test_drop_keeps_valid_chunks_in_order():
    f = FreshnessFilter("2024-01-01")
    assert isinstance(f, PostProcessor)
    out = f.process({"q": "x"}, RUN, CHUNKS)
    assert ranked(out["q"]) == ["new#0", "any#0"]
    assert f.stats["invalid_per_query"] == 2.0
    assert RUN["q"]["old#0"] == 4.0  # the input run is not modified


def test_demote_moves_invalid_chunks_below_valid_ones():
    out = FreshnessFilter("2024-01-01", mode="demote").process({"q": "x"}, RUN, CHUNKS)
    assert ranked(out["q"]) == ["new#0", "any#0", "old#0", "future#0"]


def test_window_ends_are_inclusive():
    f = FreshnessFilter("2023-06-30")
    assert f.valid(CHUNKS["old#0"]) and not f.valid(CHUNKS["new#0"])


def test_bad_settings_and_dates_are_one_line_errors():
    with pytest.raises(ConfigError, match="mode must be drop or demote"):
        FreshnessFilter("2024-01-01", mode="hide")
    with pytest.raises(ConfigError, match="as_of: '01/02/2024' is not an ISO date"):
        FreshnessFilter("01/02/2024")
    bad = {"b#0": chunk("b#0", "soon", None)}
    with pytest.raises(ConfigError, match="b: valid_from: 'soon' is not an ISO date"):
        FreshnessFilter("2024-01-01").process({"q": "x"}, {"q": {"b#0": 1.0}}, bad)
