"""rag_lab.chunker: the span contract for every chunker on a bilingual Markdown document, window
arithmetic for fixed_size, semantic boundaries and overlap for recursive."""

from __future__ import annotations

import pytest

from rag_lab.chunker import (
    Chunker,
    FixedSizeChunker,
    NoneChunker,
    RecursiveChunker,
    SectionSchemaChunker,
)
from rag_lab.parser.markdown import heading_sections
from rag_lab.text import TOKEN
from rag_lab.types import Document

ZH_SENTENCES = [
    f"第{i}步：检查主轴轴承润滑和冷却液流量，确认温度低于{60 + i}度。" for i in range(1, 21)
]

BODY = (
    "Service notes for the HX-200 unit. Read them before maintenance.\n\n"
    "# HX-200 液压站\n\n"
    "## E102 油温过高\n\n"
    "Fault E102 means the hydraulic oil is too hot. "
    "The unit stops when oil temperature exceeds 70 °C. "
    "Check the cooling fan and the oil level. Replace the filter if it is clogged.\n\n"
    + "".join(ZH_SENTENCES)
    + "\n\n"
    "- 检查风扇\n- 检查油位\n- Check the relief valve\n\n"
    "### Causes\n\n"
    "Cooling fan failure, low oil level, or a blocked cooler.\n\n"
    "## E105\n\n"
    "系统压力低于 8 MPa。检查溢流阀和泵联轴器。Check the pump coupling.\n"
)
META = {"doc_type": "manual", "language": "zh-en", "entities": ["HX-200", "E102"]}


def make_doc(doc_id: str = "manuals/hx200", text: str = BODY) -> Document:
    return Document(doc_id, text, "HX-200 manual", META, heading_sections(text))


CHUNKERS = {
    "none": NoneChunker(),
    "fixed_chars": FixedSizeChunker(size=120, overlap=30, unit="chars"),
    "fixed_tokens": FixedSizeChunker(size=40, overlap=8, unit="tokens"),
    "recursive": RecursiveChunker(max_chars=150),
    "recursive_overlap": RecursiveChunker(max_chars=150, overlap_chars=60),
    "section_schema": SectionSchemaChunker(max_chars=150),
}


@pytest.mark.parametrize("name", list(CHUNKERS))
def test_span_contract(name):
    chunker = CHUNKERS[name]
    assert isinstance(chunker, Chunker)
    docs = [make_doc("a"), make_doc("b/c", "# Other\n\nShort text.\n")]
    chunks = chunker.chunk(docs)
    by_doc = {d.doc_id: [c for c in chunks if c.doc_id == d.doc_id] for d in docs}
    # document order
    assert [c.doc_id for c in chunks] == [c.doc_id for d in docs for c in by_doc[d.doc_id]]
    for doc in docs:
        mine = by_doc[doc.doc_id]
        assert mine, doc.doc_id
        assert [c.chunk_id for c in mine] == [f"{doc.doc_id}#{i}" for i in range(len(mine))]
        starts = [c.start for c in mine]
        # text order, no duplicates
        assert starts == sorted(starts) and len(set(starts)) == len(starts)
        for c in mine:
            assert c.text == doc.text[c.start : c.end]
            assert c.text and c.text == c.text.strip()
            assert c.title == doc.title
            sec = doc.section_at(c.start)
            # the document's metadata, the section's, and the heading path
            path = {"section_path": list(sec.path)} if sec and sec.path else {}
            assert dict(c.metadata) == {**doc.metadata, **path}
            assert c.section == (sec.title if sec else "")
    # section path set: chunks of the first doc start under several heading paths
    if name != "none":
        assert len({c.section for c in by_doc["a"]} - {""}) >= 2
        assert "HX-200 液压站 > E102 油温过高" in {c.section for c in by_doc["a"]}
    if name.startswith("recursive"):  # chunks stay in their section, so the small ones show up too
        assert "HX-200 液压站 > E102 油温过高 > Causes" in {c.section for c in by_doc["a"]}
        assert "HX-200 液压站 > E105" in {c.section for c in by_doc["a"]}
    assert chunker.chunk(docs) == chunks  # pure


def test_none_chunker_is_the_whole_document():
    doc = make_doc()
    (c,) = NoneChunker().chunk([doc])
    assert (c.chunk_id, c.start, c.end) == ("manuals/hx200#0", 0, len(doc.text.rstrip()))
    assert c.section == ""  # the intro before the first heading has an empty path


def test_chunk_index_text_has_title_and_section():
    c = FixedSizeChunker(size=60, overlap=0).chunk([make_doc()])[-1]
    assert c.index_text == f"HX-200 manual {c.section}\n{c.text}"


@pytest.mark.parametrize(
    "size,overlap,n",
    [(30, 10, 100), (30, 10, 90), (30, 10, 91), (25, 0, 100), (50, 49, 60), (200, 20, 100)],
)
def test_fixed_chars_windows_by_formula(size, overlap, n):
    text = ("abcdefghij" * 20)[:n]  # no whitespace, so no trimming
    chunks = FixedSizeChunker(size=size, overlap=overlap).chunk([Document("d", text)])
    step = size - overlap
    expected = [(s, min(s + size, n)) for s in range(0, max(n - overlap, 1), step)]
    assert [(c.start, c.end) for c in chunks] == expected
    assert chunks[0].start == 0 and chunks[-1].end == n  # covers the text
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.start - a.start == step
        assert a.end - a.start == size
        assert a.end - b.start == overlap  # consecutive windows share `overlap` chars
        assert b.end > a.end  # every window adds new text


def test_fixed_tokens_windows_by_formula():
    doc = make_doc()
    size, overlap = 40, 8
    toks = [m.span() for m in TOKEN.finditer(doc.text)]
    chunks = FixedSizeChunker(size=size, overlap=overlap, unit="tokens").chunk([doc])
    starts = range(0, len(toks) - overlap, size - overlap)
    assert [(c.start, c.end) for c in chunks] == [
        (toks[i][0], toks[min(i + size, len(toks)) - 1][1]) for i in starts
    ]
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert len(TOKEN.findall(a.text)) == size
        assert len(TOKEN.findall(doc.text[b.start : a.end])) == overlap
    assert chunks[-1].end == toks[-1][1]
    # a CJK character is one token; a Latin word or a code is one token
    assert TOKEN.findall("油温E102 hot.") == ["油", "温", "E102", "hot", "."]


def test_recursive_respects_max_chars_and_headings():
    doc = make_doc()
    for chunker in (
        RecursiveChunker(max_chars=150),
        RecursiveChunker(max_chars=150, overlap_chars=60),
        RecursiveChunker(max_chars=40),
    ):
        chunks = chunker.chunk([doc])
        assert max(len(c.text) for c in chunks) <= chunker.max_chars
        for c in chunks:
            # never crosses a heading: start and last character lie in the same section
            assert doc.section_at(c.start) == doc.section_at(c.end - 1), c.text
            assert "\n#" not in c.text


def test_recursive_cuts_chinese_paragraph_at_sentence_ends():
    para = "".join(ZH_SENTENCES)
    assert len(para) > 3 * 150 and all(len(s) < 60 for s in ZH_SENTENCES)
    doc = Document("zh", para)
    chunks = RecursiveChunker(max_chars=150).chunk([doc])
    assert len(chunks) >= 4
    for c in chunks:
        assert c.text.endswith("。")
        assert c.start == 0 or para[c.start - 1] == "。"
    assert "".join(c.text for c in chunks) == para  # no overlap: the chunks tile the paragraph
    # greedy merge: a chunk plus the next sentence would not fit
    for a, b in zip(chunks, chunks[1:], strict=False):
        next_sentence = para[b.start : para.index("。", b.start) + 1]
        assert len(a.text) + len(next_sentence) > 150


def test_recursive_overlap_shares_text():
    para = "".join(ZH_SENTENCES)
    chunks = RecursiveChunker(max_chars=150, overlap_chars=60).chunk([Document("zh", para)])
    assert len(chunks) >= 4
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.start < a.end  # shared text
        assert a.end - b.start <= 60
        assert b.end > a.end  # progress
        assert b.text.endswith("。") and para[b.start - 1] == "。"  # overlap is whole sentences
    no_overlap = RecursiveChunker(max_chars=150).chunk([Document("zh", para)])
    assert all(b.start >= a.end for a, b in zip(no_overlap, no_overlap[1:], strict=False))


def test_recursive_short_document_is_one_chunk_and_empty_heading_is_skipped():
    text = "# A\n## B\n\nbody under B.\n"
    doc = Document("d", text, "", {}, heading_sections(text))
    chunks = RecursiveChunker(max_chars=100).chunk([doc])
    assert [c.text for c in chunks] == ["## B\n\nbody under B."]
    assert chunks[0].section == "A > B"


def test_recursive_hard_cut_when_no_boundary():
    text = "x" * 95
    chunks = RecursiveChunker(max_chars=40).chunk([Document("d", text)])
    assert [(c.start, c.end) for c in chunks] == [(0, 40), (40, 80), (80, 95)]


@pytest.mark.parametrize(
    "factory",
    [
        lambda: FixedSizeChunker(size=0),
        lambda: FixedSizeChunker(size=10, overlap=10),
        lambda: FixedSizeChunker(size=10, overlap=-1),
        lambda: FixedSizeChunker(size=10, overlap=2, unit="words"),
        lambda: RecursiveChunker(max_chars=0),
        lambda: RecursiveChunker(max_chars=100, overlap_chars=100),
        lambda: RecursiveChunker(max_chars=100, overlap_chars=-5),
    ],
)
def test_invalid_params_raise(factory):
    with pytest.raises(ValueError):
        factory()


def covered(doc: Document, chunks) -> set[int]:
    return {i for c in chunks for i in range(c.start, c.end)}


@pytest.mark.parametrize("name", ["none", "fixed_chars", "fixed_tokens"])
def test_slicing_chunkers_cover_every_character(name):
    doc = make_doc()
    cov = covered(doc, CHUNKERS[name].chunk([doc]))
    assert {i for i, ch in enumerate(doc.text) if not ch.isspace()} <= cov


def test_recursive_covers_all_but_bodyless_headings():
    text = (
        "Preamble line one.\nPreamble line two.\n\n# A\n## B\n\nbody under B.\n\n"
        "## C\n\nbody under C.\n"
    )
    doc = Document("d", text, "", {}, heading_sections(text))
    cov = covered(doc, RecursiveChunker(max_chars=30).chunk([doc]))
    bodyless = range(text.index("# A"), text.index("## B"))
    assert {i for i, ch in enumerate(text) if not ch.isspace() and i not in bodyless} <= cov
    assert not cov & set(bodyless)


def test_recursive_keeps_one_line_preamble():
    text = "Read these notes before maintenance.\n\n# A\n\nbody under A.\n"
    doc = Document("d", text, "", {}, heading_sections(text))
    texts = [c.text for c in RecursiveChunker(max_chars=100).chunk([doc])]
    assert texts[0] == "Read these notes before maintenance."
