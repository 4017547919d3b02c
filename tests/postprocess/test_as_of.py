"""Per-query ``as_of``: the metadata filter and the rule reranker take each query's date from its
metadata (``QueryMetadataAware``), else from the config."""

from __future__ import annotations

import pytest

from rag_lab.errors import DataError
from rag_lab.postprocess import MetadataFilter
from rag_lab.protocols import QueryMetadataAware
from rag_lab.reranker import RuleReranker
from rag_lab.types import Chunk
from rag_lab.validate import OptionError


def chunk(cid: str, **meta: object) -> Chunk:
    return Chunk(cid, cid.split("#")[0], "E102 停泵温度", 0, 9, "", "", meta)


CHUNKS = {
    c.chunk_id: c
    for c in (
        chunk("v1#0", valid_from="2021-01-01", valid_to="2023-06-30"),
        chunk("v2#0", valid_from="2023-07-01", valid_to=None),
        chunk("open#0"),  # no window: valid on every date
    )
}
SCORES = {"v2#0": 3.0, "v1#0": 2.0, "open#0": 1.0}
RUN = {"old": dict(SCORES), "new": dict(SCORES), "undated": dict(SCORES)}
QUERIES = {q: "HX-200 E102 停泵温度" for q in RUN}
META = {"old": {"as_of": "2022-05-10"}, "new": {"as_of": "2024-05-10"}, "undated": {}}


def test_the_filter_keeps_what_is_valid_on_each_querys_own_date() -> None:
    f = MetadataFilter()
    assert isinstance(f, QueryMetadataAware) and f.query_metadata_fields == ("as_of",)
    f.set_query_metadata(META)
    out = f.process(QUERIES, RUN, CHUNKS)
    assert list(out["old"]) == ["v1#0", "open#0"]
    assert list(out["new"]) == ["v2#0", "open#0"]
    assert out["undated"] == SCORES  # no date of its own and none configured: untouched
    assert f.stats["dated_queries"] == 2 and f.stats["removed_per_query"] == pytest.approx(2 / 3)
    assert f.stats["ms_per_query"] >= 0


def test_the_config_date_is_the_fallback_and_query_as_of_false_ignores_metadata() -> None:
    f = MetadataFilter(as_of="2022-01-01")
    f.set_query_metadata(META)
    out = f.process(QUERIES, RUN, CHUNKS)
    assert list(out["new"]) == ["v2#0", "open#0"] and list(out["undated"]) == ["v1#0", "open#0"]
    g = MetadataFilter(as_of="2022-01-01", query_as_of=False)
    g.set_query_metadata(META)
    assert all(list(r) == ["v1#0", "open#0"] for r in g.process(QUERIES, RUN, CHUNKS).values())


def test_new_metadata_replaces_the_old() -> None:
    f = MetadataFilter()
    f.set_query_metadata(META)
    f.set_query_metadata({})  # the pipeline calls it before every run, also without metadata
    assert f.process(QUERIES, RUN, CHUNKS) == RUN


def test_the_rule_reranker_demotes_chunks_expired_on_the_querys_date() -> None:
    r = RuleReranker(entity_rule="off", expired_factor=0.5)
    assert isinstance(r, QueryMetadataAware)
    r.set_query_metadata(META)
    out = r.process(QUERIES, RUN, CHUNKS)
    # min-max into [0.1, 1]: v2 1.0, v1 0.55, open 0.1; then x 0.5 outside the window
    assert out["old"] == pytest.approx({"v2#0": 0.5, "v1#0": 0.55, "open#0": 0.1})
    assert out["new"] == pytest.approx({"v2#0": 1.0, "v1#0": 0.275, "open#0": 0.1})
    assert out["undated"] == pytest.approx({"v2#0": 1.0, "v1#0": 0.55, "open#0": 0.1})
    assert r.stats["dated_queries"] == 2


def test_a_bad_query_date_names_the_query_and_a_bad_config_date_the_key() -> None:
    with pytest.raises(DataError, match=r"query q7: metadata as_of='2024-13-01' is not an ISO"):
        MetadataFilter().set_query_metadata({"q7": {"as_of": "2024-13-01"}})
    with pytest.raises(OptionError, match="as_of='yesterday'"):
        MetadataFilter(as_of="yesterday")
    with pytest.raises(OptionError, match="query_as_of='yes'"):
        RuleReranker(query_as_of="yes")  # type: ignore[arg-type]
