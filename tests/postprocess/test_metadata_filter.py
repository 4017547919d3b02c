"""Metadata filters: equality, membership (list fields too), latest version per family."""

from __future__ import annotations

import pytest

from rag_lab.errors import DataError
from rag_lab.postprocess import MetadataFilter, PostProcessor
from rag_lab.types import Chunk
from rag_lab.validate import OptionError


def chunk(cid, **meta) -> Chunk:
    return Chunk(cid, cid.split("#")[0], "text", 0, 4, "", "", meta)


CHUNKS = {
    c.chunk_id: c
    for c in (
        chunk("hx200-manual-v1#0", version="1.0", source_type="manual", entity_tags=["E102"]),
        chunk("hx200-manual-v2#0", version="2.0", source_type="manual", entity_tags=["E102"]),
        chunk("hx200-manual-v2#1", version="2.0", source_type="manual", entity_tags=["E105"]),
        chunk("sv7-firmware-3-2#0", version="3.2", source_type="release_note", entity_tags=[]),
        chunk("sv7-firmware-3-10#0", version="3.10", source_type="release_note", entity_tags=[]),
        chunk("TCK-1#0", source_type="ticket", entity_tags=["E102"]),
    )
}
RUN = {"q": {c: float(10 - i) for i, c in enumerate(CHUNKS)}}


def test_equality_and_membership():
    f = MetadataFilter(equals={"source_type": "manual"})
    assert isinstance(f, PostProcessor)
    assert set(f.process({"q": ""}, RUN, CHUNKS)["q"]) == {
        "hx200-manual-v1#0",
        "hx200-manual-v2#0",
        "hx200-manual-v2#1",
    }
    tags = MetadataFilter(any_of={"entity_tags": ["E102"]}).process({"q": ""}, RUN, CHUNKS)["q"]
    assert set(tags) == {"hx200-manual-v1#0", "hx200-manual-v2#0", "TCK-1#0"}


def test_latest_version_per_family_compares_versions_as_numbers():
    f = MetadataFilter(latest_version=True)
    assert f.family("hx200-manual-v2") == "hx200-manual" and f.family("sv7-firmware-3-10") == (
        "sv7-firmware"
    )
    kept = f.process({"q": ""}, RUN, CHUNKS)["q"]
    # 3.10 > 3.2; v2 > v1; the ticket is a family of its own
    assert set(kept) == {"hx200-manual-v2#0", "hx200-manual-v2#1", "sv7-firmware-3-10#0", "TCK-1#0"}
    assert list(kept) == [c for c in RUN["q"] if c in kept]  # order kept


def test_a_query_it_would_empty_keeps_its_run_and_is_counted():
    f = MetadataFilter(equals={"source_type": "wiki"})
    assert f.process({"q": ""}, RUN, CHUNKS)["q"] == RUN["q"]
    assert f.stats["emptied_queries"] == 1


def test_bad_options():
    with pytest.raises(OptionError, match="any_of.section_type"):
        MetadataFilter(any_of={"section_type": "troubleshooting"})
    with pytest.raises(OptionError, match="family_pattern"):
        MetadataFilter(family_pattern="(")


# -- on_empty (issue 32, item 12): a filter that matches nothing ----------------------------------
def test_on_empty_keep_empty_fail_are_counted_and_flagged():
    queries = {"q": "", "r": ""}
    run = {"q": RUN["q"], "r": {"hx200-manual-v2#0": 1.0}}
    keep = MetadataFilter(equals={"source_type": "ticket"})
    out = keep.process(queries, run, CHUNKS)
    assert out["q"] == {"TCK-1#0": RUN["q"]["TCK-1#0"]}  # matched: filtered as before
    assert out["r"] == run["r"]  # matched nothing: keeps its run (the default)
    assert keep.stats["emptied_queries"] == 1
    assert keep.annotations == {"r": {"filter_empty": "keep"}}
    empty = MetadataFilter(equals={"source_type": "ticket"}, on_empty="empty")
    assert empty.process(queries, run, CHUNKS)["r"] == {}
    assert empty.annotations == {"r": {"filter_empty": "empty"}}
    fail = MetadataFilter(equals={"source_type": "ticket"}, on_empty="fail")
    with pytest.raises(DataError, match="query r: the filter removes all 1 of its chunks"):
        fail.process(queries, run, CHUNKS)
    with pytest.raises(OptionError, match="on_empty"):
        MetadataFilter(on_empty="open")


def test_a_permission_criterion_never_fails_open():
    chunks = {
        "a#0": chunk("a#0", source_type="manual", readers=["group:ops"]),
        "b#0": chunk("b#0", source_type="ticket", readers=["group:sales"]),
    }
    run = {"q": {"a#0": 2.0, "b#0": 1.0}}
    # nothing is both a wiki page and readable by ops: keep keeps the run minus what ops can't read
    f = MetadataFilter(equals={"source_type": "wiki"}, any_of={"readers": ["group:ops"]})
    assert f.process({"q": ""}, run, chunks)["q"] == {"a#0": 2.0}
    assert f.annotations == {"q": {"filter_empty": "keep"}}
    only = MetadataFilter(any_of={"readers": ["group:hr"]})
    assert only.process({"q": ""}, run, chunks)["q"] == {}
