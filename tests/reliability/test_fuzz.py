"""Property-based fuzzing (issue 13) of the loaders, parsers and chunkers, bounded in time.

Properties: no input makes a loader or parser raise anything but ``RagLabError`` (a one-line
user error), and every chunk maps back to its document (``doc.text[c.start:c.end] == c.text``),
in text order, trimmed, within the size budget, covering the text. Inputs the fuzzer found are
kept below as plain regression tests (``test_found_*``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_lab.chunker import (
    FixedSizeChunker,
    NoneChunker,
    RecursiveChunker,
    SectionSchemaChunker,
)
from rag_lab.chunker.base import Chunker
from rag_lab.dataset import read_qrels, read_queries
from rag_lab.errors import RagLabError
from rag_lab.io.files import read_jsonl
from rag_lab.parser import JsonlRecordsParser, MarkdownParser, PlainTextParser
from rag_lab.parser.markdown import heading_sections
from rag_lab.pipeline.corpus import parse_corpus
from rag_lab.text.patterns import TOKEN
from rag_lab.types import Document

# about 1 s per property on one shared core, all of them well under 30 s; a longer hunt:
#   RAG_LAB_FUZZ_EXAMPLES=5000 python -m pytest tests/reliability/test_fuzz.py
FUZZ = settings(
    max_examples=int(os.environ.get("RAG_LAB_FUZZ_EXAMPLES", "120")),
    deadline=2000,
    database=None,  # no .hypothesis/ folder in the checkout
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# characters that mean something to one of the formats, plus a few that break naive code
SPECIAL = "#-*+.。！？；，,;:：()（）`~\\\"'{}[]\t\n\r \x00\x0b\x0c\x1c\x85\u2028\ufeff中文é1 "
texty = st.text(
    alphabet=st.sampled_from(SPECIAL) | st.characters(exclude_categories=("Cs",)), max_size=300
)  # no lone surrogates: a file cannot hold one
encodings = st.sampled_from(["utf-8", "utf-8-sig", "gbk", "latin-1", "utf-16"])


@st.composite
def file_bytes(draw: st.DrawFn, text: st.SearchStrategy[str] = texty) -> bytes:
    """Bytes of a text file: text in some encoding (errors replaced), or raw bytes."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    return draw(text).encode(draw(encodings), errors="replace")


json_scalar = st.none() | st.booleans() | st.integers() | st.floats() | texty
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texty, inner, max_size=3),
    max_leaves=8,
)
record = st.fixed_dictionaries(
    {},
    optional={"_id": json_value, "text": json_value, "title": json_value, "metadata": json_value},
)
jsonl_line = (
    record.map(lambda r: json.dumps(r, ensure_ascii=False))
    | json_value.map(json.dumps)
    | texty
    | st.sampled_from(['{"_id": "a", "text": "\\ud800"}', "[" * 3000, '{"a": ' + "1" * 5000 + "}"])
)
jsonl_text = st.lists(jsonl_line, max_size=6).map("\n".join)

qrels_field = st.sampled_from(
    ["q1", "d1", "0", "1", "2", "0.5", "1e400", "nan", "-inf", "", " ", '"', '"q"', "query-id"]
) | texty.filter(lambda s: "\n" not in s and "\r" not in s)
qrels_line = st.lists(qrels_field, max_size=5).map("\t".join)
qrels_text = st.lists(qrels_line, max_size=8).map("\n".join)

yaml_line = (
    st.sampled_from(
        [
            "doc_id: a",
            "title: T",
            "valid_from: 2024-13-45",
            "valid_to: 2024-01-01",
            "when: 2024-01-01 25:00:00",
            "x: &a [*a]",
            "y: &b {k: *b}",
            "? [a]\n: b",
            "z: !!python/object:os.system x",
            "n: " + "[" * 200,
            "- a list",
            "k: 'unclosed",
            "entities: [E102, E105]",
            "nested: {d: 2024-02-02, l: [2024-03-03]}",
            "big: 1e99999",
            "bin: !!binary aGVsbG8=",
        ]
    )
    | texty
)
markdown_text = st.builds(
    lambda fm, body: (f"---\n{fm}\n---\n" if fm is not None else "") + body,
    st.none() | st.lists(yaml_line, max_size=4).map("\n".join),
    st.lists(
        st.sampled_from(["# A", "## B #", "### C ###", "```", "~~~", "#no", "###### F", ""])
        | texty,
        max_size=8,
    ).map("\n".join),
)


def write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def only_rag_lab_errors(call) -> object:
    """Run ``call``; a ``RagLabError`` is an accepted outcome (``None``), anything else fails."""
    try:
        return call()
    except RagLabError as exc:
        assert "\n" not in str(exc), str(exc)  # one line
        return None


# -- loaders --------------------------------------------------------------------------------------


@FUZZ
@given(data=file_bytes(jsonl_text) | jsonl_text.map(str.encode))
def test_jsonl_and_queries_loaders(folder, data):
    path = write(folder, "queries.jsonl", data)
    only_rag_lab_errors(lambda: list(read_jsonl(path)))
    queries = only_rag_lab_errors(lambda: read_queries(path))
    if queries:
        for q in queries.values():
            q.text.encode("utf-8")  # every accepted text can be written out again


@FUZZ
@given(data=file_bytes(qrels_text) | qrels_text.map(str.encode))
def test_qrels_loader(folder, data):
    path = write(folder, "test.tsv", data)
    qrels = only_rag_lab_errors(lambda: read_qrels(path))
    if qrels:
        for grades in qrels.values():
            assert grades and all(isinstance(g, (int, float)) and g == g for g in grades.values())


@FUZZ
@given(data=file_bytes(jsonl_text) | jsonl_text.map(str.encode))
def test_jsonl_records_parser(folder, data):
    path = write(folder, "corpus.jsonl", data)
    for on_empty in ("skip", "fail"):
        docs = only_rag_lab_errors(
            lambda on_empty=on_empty: parse_corpus(JsonlRecordsParser(), [path], folder, on_empty)
        )
        for doc in docs or []:
            assert doc.text.strip() and json.dumps(dict(doc.metadata), default=str)


# -- parsers --------------------------------------------------------------------------------------


def check_sections(doc: Document) -> None:
    last = 0
    for sec in doc.sections:
        assert last <= sec.start < sec.end <= len(doc.text)
        last = sec.end


@FUZZ
@given(data=file_bytes(markdown_text) | markdown_text.map(str.encode))
def test_markdown_parser(folder, data):
    path = write(folder, "doc.md", data)
    docs = only_rag_lab_errors(lambda: list(MarkdownParser().parse(path, folder)))
    for doc in docs or []:
        check_sections(doc)
        json.dumps(dict(doc.metadata), default=str)  # storable (stage cache, exports)
        assert isinstance(doc.doc_id, str) and isinstance(doc.title, str)


@FUZZ
@given(data=file_bytes())
def test_plain_text_parser(folder, data):
    path = write(folder, "doc.txt", data)
    docs = only_rag_lab_errors(lambda: list(PlainTextParser().parse(path, folder)))
    for doc in docs or []:
        assert "\r" not in doc.text


# real files of each new format (the shipped sample's), damaged: bytes cut, flipped, inserted
SAMPLE_DOCS = Path(__file__).resolve().parents[2] / "rag_lab" / "sample" / "maintenance_kb" / "docs"
REAL = {
    ".pdf": SAMPLE_DOCS / "manuals" / "hx200-manual-v2.pdf",
    ".html": SAMPLE_DOCS / "release_notes" / "hx200-controller-firmware-2-1.html",
    ".docx": SAMPLE_DOCS / "manuals" / "loto-safety-procedure.docx",
    ".csv": SAMPLE_DOCS / "tickets" / "ticket-export-2024.csv",
}


@st.composite
def damaged(draw: st.DrawFn, suffix: str) -> bytes:
    data = bytearray(REAL[suffix].read_bytes())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        how = draw(st.sampled_from(["cut", "flip", "insert", "zero"]))
        if how == "cut":
            del data[at:]
        elif how == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif how == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=40))
        elif data:
            data[at : at + 64] = bytes(len(data[at : at + 64]))
    return bytes(data)


# a damaged PDF can send pdfminer into its slow repair path (~3 s): a longer deadline, fewer cases
FUZZ_FILES = settings(
    FUZZ, max_examples=int(os.environ.get("RAG_LAB_FUZZ_EXAMPLES", "30")), deadline=20_000
)


@pytest.mark.parametrize("suffix", sorted(REAL))
def test_damaged_documents_are_data_errors(folder, suffix):
    from rag_lab.parser import CsvRecordsParser, DocxParser, HtmlParser, PdfParser

    parser = {
        ".pdf": PdfParser(ocr="off"),
        ".html": HtmlParser(),
        ".docx": DocxParser(),
        ".csv": CsvRecordsParser(title_field="title"),
    }[suffix]

    @FUZZ_FILES
    @given(data=damaged(suffix) | file_bytes())
    def check(data: bytes) -> None:
        path = write(folder, f"doc{suffix}", data)
        docs = only_rag_lab_errors(lambda: list(parser.parse(path, folder)))
        for doc in docs or []:
            check_sections(doc)
            json.dumps(dict(doc.metadata), default=str)

    check()


# -- chunkers -------------------------------------------------------------------------------------


@st.composite
def documents(draw: st.DrawFn) -> Document:
    text = draw(markdown_text | texty)
    sections = heading_sections(text) if draw(st.booleans()) else ()
    return Document("d", text, draw(st.sampled_from(["", "T"])), {"k": 1}, sections)


@st.composite
def chunkers(draw: st.DrawFn) -> Chunker:
    kind = draw(st.sampled_from(["none", "fixed_size", "recursive", "section_schema"]))
    if kind == "none":
        return NoneChunker()
    if kind == "section_schema":
        return SectionSchemaChunker(draw(st.integers(1, 80)))
    if kind == "fixed_size":
        size = draw(st.integers(1, 60))
        overlap = draw(st.integers(0, size - 1))
        return FixedSizeChunker(size, overlap, draw(st.sampled_from(["chars", "tokens"])))
    size = draw(st.integers(1, 80))
    return RecursiveChunker(size, draw(st.integers(0, size - 1)))


def check_chunks(chunker: Chunker, doc: Document) -> None:
    chunks = chunker.chunk([doc])
    text = doc.text
    covered = [False] * len(text)
    last_start = -1
    for i, c in enumerate(chunks):
        assert c.chunk_id == f"d#{i}" and c.doc_id == "d"
        assert 0 <= c.start < c.end <= len(text)
        assert text[c.start : c.end] == c.text  # the offset contract
        assert c.text == c.text.strip()
        assert c.start >= last_start  # text order
        last_start = c.start
        sec = doc.section_at(c.start)
        assert c.section == (sec.title if sec else "")
        path = {"section_path": list(sec.path)} if sec and sec.path else {}
        assert c.title == doc.title and dict(c.metadata) == {"k": 1, **path}
        if isinstance(chunker, RecursiveChunker):
            assert len(c.text) <= chunker.max_chars
        if isinstance(chunker, SectionSchemaChunker):  # a single table row longer stays whole
            assert len(c.text) <= chunker.max_chars or "\n" not in c.text
        if isinstance(chunker, FixedSizeChunker) and chunker.unit == "chars":
            assert len(c.text) <= chunker.size
        for p in range(c.start, c.end):
            covered[p] = True
    if isinstance(chunker, FixedSizeChunker) and chunker.unit == "tokens":
        must = [p for m in TOKEN.finditer(text) for p in range(*m.span())]
    elif isinstance(chunker, (RecursiveChunker, SectionSchemaChunker)):
        # heading-only pieces are dropped by design (their title lives on in ``section``)
        heading_lines = {
            p
            for line_start, line in _lines(text)
            if line.strip().startswith("#")
            for p in range(line_start, line_start + len(line))
        }
        must = [p for p, ch in enumerate(text) if not ch.isspace() and p not in heading_lines]
    else:
        must = [p for p, ch in enumerate(text) if not ch.isspace()]
    missing = [p for p in must if not covered[p]]
    assert not missing, (missing[:5], text)


def _lines(text: str):
    start = 0
    for line in text.split("\n"):
        yield start, line
        start += len(line) + 1


@FUZZ
@given(chunker=chunkers(), doc=documents())
def test_chunkers_keep_the_offset_contract(chunker, doc):
    check_chunks(chunker, doc)


# -- inputs the fuzzer found, kept as plain regression tests --------------------------------------
# (before the fixes each raised the exception named in its comment, or passed a bad value on)


def test_found_yaml_reader_error_is_one_line(tmp_path):
    # yaml.ReaderError's message has two lines; the error line must stay one line
    path = write(tmp_path, "doc.md", b"---\n\x1f\n---\n")
    with pytest.raises(RagLabError) as exc:
        list(MarkdownParser().parse(path, tmp_path))
    assert str(exc.value) == (
        f"{path}: malformed YAML front matter (unacceptable character #x001f: special characters "
        'are not allowed in "<unicode string>", position 0)'
    )


@pytest.mark.parametrize(
    "front, reason",
    [
        ("valid_from: 2024-13-45", "month must be in 1..12"),  # ValueError from yaml's dates
        ("when: 2024-01-01 25:00:00", "hour must be in 0..23"),  # ValueError
        ("x: &a [*a]", "refers to itself"),  # RecursionError in the date normaliser
        ("y: &b {k: *b}", "refers to itself"),  # metadata that JSON cannot store
        ("n: " + "[" * 10000, "nested too deeply"),  # RecursionError inside yaml
    ],
)
def test_found_front_matter_that_yaml_cannot_give_back(tmp_path, front, reason):
    path = write(tmp_path, "doc.md", f"---\n{front}\n---\n# T\nbody\n".encode())
    with pytest.raises(RagLabError, match=rf"doc\.md: .*{reason}"):
        list(MarkdownParser().parse(path, tmp_path))


def test_found_nested_dates_in_front_matter_are_iso_strings(tmp_path):
    path = write(tmp_path, "doc.md", b"---\nnested: {d: 2024-02-02, l: [2024-03-03]}\n---\nx\n")
    (doc,) = MarkdownParser().parse(path, tmp_path)
    assert doc.metadata["nested"] == {"d": "2024-02-02", "l": ["2024-03-03"]}


@pytest.mark.parametrize(
    "line, reason",
    [
        ("[" * 3000, "nested too deeply"),  # RecursionError from json
        ('{"_id": "a", "text": ' + "1" * 5000 + "}", "Exceeds the limit"),  # ValueError
        ('{"_id": "a", "text": "x\\ud800"}', "unpaired UTF-16 surrogate"),  # crashed at encode
    ],
)
def test_found_json_lines_that_json_cannot_give_back(tmp_path, line, reason):
    path = write(tmp_path, "queries.jsonl", (line + "\n").encode())
    with pytest.raises(RagLabError, match=rf"queries\.jsonl:1: .*{reason}"):
        read_queries(path)


def test_paired_surrogate_escape_is_text(tmp_path):
    path = write(tmp_path, "queries.jsonl", b'{"_id": "a", "text": "\\ud83d\\ude00"}\n')
    assert read_queries(path)["a"].text == "\U0001f600"


def test_found_a_page_without_a_media_box_is_a_data_error(tmp_path):
    """pdfplumber's close() walks the page tree again and raised TypeError over the DataError."""
    from rag_lab.parser import PdfParser

    src = REAL[".pdf"].read_bytes()
    box = b"/MediaBox [ 0 0 595.2756 841.8898 ]"
    path = tmp_path / "no-box.pdf"
    path.write_bytes(src.replace(box, b"/MediaBox null".ljust(len(box)), 1))  # offsets kept
    with pytest.raises(RagLabError, match=r"no-box\.pdf: not a readable PDF"):
        list(PdfParser(ocr="off").parse(path, tmp_path))
