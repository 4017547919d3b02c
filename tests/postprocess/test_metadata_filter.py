"""Metadata filters: equality, membership (list fields too), latest version per family."""

from __future__ import annotations

import pytest

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
