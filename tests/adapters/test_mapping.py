"""Sources → chunk ids: by metadata, exact text, normalised containment; unmapped ones counted."""

from __future__ import annotations

from rag_lab.adapters.mapping import MappingCounts, Source, SourceMapper, normalise
from rag_lab.chunker import RecursiveChunker
from rag_lab.types import Document

DOC_A = Document(
    "a",
    "# Spindle\n\nAlarm E120 means the spindle is too hot. Let it cool below 60 C.\n\n"
    "Then run the warm-up program before any roughing.",
    "Manual A",
)
DOC_B = Document("b", "Hydraulic pressure must exceed 1.5 MPa, else alarm E21 is raised.", "B")
CHUNKS = {c.chunk_id: c for c in RecursiveChunker(max_chars=60).chunk([DOC_A, DOC_B])}


def test_the_toy_corpus_has_several_chunks_per_document():
    assert [c for c in CHUNKS if c.startswith("a#")] == ["a#0", "a#1", "a#2"]
    assert CHUNKS["a#1"].text == "Let it cool below 60 C."


def test_each_step_maps_what_it_should():
    m = SourceMapper(CHUNKS)
    # 1. metadata: a chunk id, or a doc id (then the chunk holding the text, else its first)
    assert m.map(Source("whatever", {"chunk_id": "a#2"})) == ("a#2", "metadata")
    assert m.map(Source("let it cool below 60 c.", {"doc_id": "a"})) == ("a#1", "metadata")
    assert m.map(Source("not in it", {"doc_id": "b"})) == ("b#0", "metadata")
    # an id the corpus lacks is no mapping: the text decides
    assert m.map(Source("Let it cool below 60 C.", {"chunk_id": "zz#0"})) == ("a#1", "exact")
    # 2. exact text (surrounding whitespace ignored)
    assert m.map(Source("  Let it cool below 60 C.\n")) == ("a#1", "exact")
    # 3. normalised containment: case, whitespace runs, NFKC (full-width digits)
    assert m.map(Source("LET IT\n  cool below ６０ c")) == ("a#1", "contained")
    # ... across a chunk boundary, inside the document: the chunk where it starts
    assert m.map(Source("too hot. let it cool")) == ("a#0", "contained")
    # ... a larger piece holding a whole chunk (another chunker's): the first chunk it holds
    big = "Intro. " + DOC_B.text + " And more."
    assert m.map(Source(big)) == ("b#0", "contained")
    # 4. nothing
    assert m.map(Source("Coolant concentration is 5 %.")) == (None, "unmapped")
    assert m.map(Source("   ")) == (None, "unmapped")


def test_map_all_keeps_order_counts_every_source_and_keeps_a_chunk_once():
    m = SourceMapper(CHUNKS)
    counts = MappingCounts()
    sources = [
        Source("x", {"chunk_id": "b#0"}),
        Source("Let it cool below 60 C."),
        Source("a stray sentence"),
        Source("hydraulic pressure MUST exceed 1.5 mpa"),  # b#0 again
    ]
    ids, rows = m.map_all(sources, counts)
    assert ids == ["b#0", "a#1"]
    assert [r["how"] for r in rows] == ["metadata", "exact", "unmapped", "duplicate"]
    assert rows[2] == {"chunk_id": None, "how": "unmapped", "text": "a stray sentence"}
    assert counts.stats() == {
        "sources": 4.0,
        "unmapped_sources": 1.0,
        "duplicate_sources": 1.0,
        "mapped_by_metadata": 1.0,
        "mapped_by_exact": 1.0,
        "mapped_by_contained": 0.0,
    }


def test_normalise():
    assert normalise("  A\tB\n\n ｃ  ") == "a b c"
    assert normalise("") == ""
