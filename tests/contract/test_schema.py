"""The metadata contract: required fields per source type, dates, identity, section types from
headings, entity tags from patterns; strict stops naming file and field, warn records."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rag_lab.chunker import RecursiveChunker
from rag_lab.contract import SchemaContract
from rag_lab.errors import ConfigError, DataError
from rag_lab.parser.markdown import heading_sections
from rag_lab.paths import CONFIG_DIR
from rag_lab.types import Document

SHIPPED = yaml.safe_load((Path(CONFIG_DIR) / "contract" / "schema.yaml").read_text())
SHIPPED.pop("_target_")

MANUAL = """# SV7 伺服报警手册

## SV0432 直流母线过电压

### 故障现象
驱动器显示 SV0432，电机减速时停机。

### 可能原因
制动电阻 SV7-BR04 断线。

### Safety warning
Wait 5 min after power-off: the DC bus holds 300 V.

## Specifications

| item | value |
|---|---|
| bus voltage | 300 V ± 10 % |
"""


def contract(**overrides) -> SchemaContract:
    return SchemaContract(**{**SHIPPED, **overrides})


def manual(doc_id="sv7-alarms", **meta) -> Document:
    base = {"doc_type": "manual", "version": "3.2", "valid_from": "2024-01-01"}
    return Document(
        doc_id, MANUAL, f"SV7 alarms {doc_id}", {**base, **meta}, heading_sections(MANUAL)
    )


def test_a_document_that_keeps_the_contract_is_completed():
    checked = contract().check([manual()], {"sv7-alarms": "docs/sv7.md"})
    assert checked.problems == ()
    (doc,) = checked.documents
    assert doc.metadata["source_type"] == "manual" and doc.metadata["doc_id"] == "sv7-alarms"
    assert doc.metadata["valid_to"] is None and doc.metadata["confidence"] == 1.0
    assert {"SV0432", "SV7-BR04"} <= set(doc.metadata["entity_tags"])
    types = {s.path[-1]: s.metadata["section_type"] for s in doc.sections}
    assert types["故障现象"] == types["可能原因"] == "troubleshooting"
    assert types["Safety warning"] == "safety_warning"
    assert types["Specifications"] == "specification"
    # every field reaches every chunk, and the section's own type and tags win over the document's
    chunks = RecursiveChunker(max_chars=120).chunk(checked.documents)
    for c in chunks:
        assert set(SHIPPED["fields"]) <= set(c.metadata)
    warn = next(c for c in chunks if "300 V." in c.text)
    assert warn.metadata["section_type"] == "safety_warning"
    cause = next(c for c in chunks if "SV7-BR04" in c.text)
    # the section's own matches and its headings' (the alarm it belongs to), not the whole manual's
    assert cause.metadata["entity_tags"] == ["SV0432", "SV7-BR04"]
    assert (
        "SV0432" not in next(c for c in chunks if "bus voltage" in c.text).metadata["entity_tags"]
    )


@pytest.mark.parametrize(
    "meta, field, words",
    [
        ({"version": None}, "version", "missing (required for source_type manual)"),
        ({"valid_from": "2024-13-45"}, "valid_from", "not an ISO date"),
        ({"valid_from": "2025-01-01", "valid_to": "2024-06-30"}, "valid_from", "after valid_to"),
        ({"doc_type": "brochure"}, "source_type", "unknown type 'brochure'"),
    ],
)
def test_problems_warn_records_strict_stops(meta, field, words):
    docs = [manual("ok"), manual("bad", **meta)]
    where = {"ok": "docs/ok.md", "bad": "docs/bad.md"}
    checked = contract().check(docs, where)
    assert [(p.doc_id, p.field) for p in checked.problems] == [("bad", field)]
    assert words in checked.problems[0].message
    assert [d.doc_id for d in checked.documents] == ["ok", "bad"]  # warn keeps them
    with pytest.raises(DataError) as exc:
        contract(mode="strict").check(docs, where)
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith("docs/bad.md: document 'bad': " + field)


def test_two_documents_with_one_identity_are_a_problem():
    a = manual("a")
    b = Document("b", a.text, a.title, a.metadata, a.sections)  # the same release, copied
    checked = contract().check([a, b], {"a": "a.pdf", "b": "copy/a.pdf"})
    (p,) = checked.problems
    assert (p.doc_id, p.where) == ("b", "copy/a.pdf")
    assert "also declared by document 'a'" in p.message


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match=r"contract\.entity_patterns\.code: invalid regular"):
        contract(entity_patterns={"code": "E[0-9"})
    with pytest.raises(ConfigError, match=r"contract\.mode"):
        contract(mode="lenient")


def test_a_merged_chunk_is_tagged_with_the_codes_of_its_own_text():
    """The chunk starts in a section that names only the model (its heading and one line); the
    fault table sits in the sub-section merged into it. Its tags hold the table's codes too."""
    from rag_lab.chunker import SectionSchemaChunker
    from rag_lab.contract import ChunkTagging

    text = (
        "# HX-200 manual\n\n## 3 Fault codes\n\nThe HX-200 controller shows these codes.\n\n"
        "### Table 3-1\n\n| code | meaning |\n|---|---|\n| E101 | overload |\n| E108 | filter |\n"
    )
    doc = Document(
        "hx",
        text,
        "HX-200 manual",
        {"doc_type": "manual", "version": "1", "valid_from": "2024-01-01"},
        heading_sections(text),
    )
    c = contract()
    assert isinstance(c, ChunkTagging)
    (checked,) = c.check([doc], {}).documents
    chunks = SectionSchemaChunker(max_chars=2000).chunk([checked])
    table_chunk = next(ch for ch in chunks if "E108" in ch.text)
    assert table_chunk.metadata["entity_tags"] == ["HX-200"]  # the section's tags alone: the bug
    (tagged,) = [t for t in c.tag_chunks(chunks) if t.chunk_id == table_chunk.chunk_id]
    assert tagged.metadata["entity_tags"] == ["E101", "E108", "HX-200"]
    assert (tagged.text, tagged.chunk_id) == (table_chunk.text, table_chunk.chunk_id)


def test_the_sample_fault_table_chunk_carries_its_codes(tmp_path):
    """On the sample (section chunks): the merged chunk holding HX-200's E101-E113 table."""
    from rag_lab.pipeline.build import build_dataset, build_pipeline
    from tests.compose import compose_evaluate

    cfg = compose_evaluate(
        ["chunker=section_schema", "retrievers=[bm25]", "tracking=none", "cache.dir=null"],
        tmp_path,
    )
    data = build_dataset(cfg).load()
    pipe = build_pipeline(cfg, data)
    chunks = pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    table = next(c for c in chunks if c.doc_id == "hx200-manual-v1" and "| E108 |" in c.text)
    assert {"E101", "E102", "E105", "E108", "HX-200"} <= set(table.metadata["entity_tags"])
