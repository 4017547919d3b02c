"""The section-schema chunker: troubleshooting blocks whole up to the budget, larger ones split on
sub-headings with the path carried, tables split only between rows."""

from __future__ import annotations

import re

from rag_lab.chunker import SectionSchemaChunker
from rag_lab.parser._builder import DocumentBuilder
from rag_lab.parser.markdown import heading_sections
from rag_lab.types import Document

BLOCK = """# HX-200 维修手册

## 3 故障排除

### E102 油温过高

#### 故障现象
面板显示 E102，油温 70 ℃ 以上，泵停机。

#### 可能原因
冷却器散热片堵塞；冷却风扇故障；溢流阀设定过低导致长时间溢流。

#### 检查步骤
1. 检查散热片是否被油泥覆盖。
2. 检查风扇转向与电流。

#### 安全警告
停泵并释放蓄能器压力后方可拆卸管路。

### E105 油位过低

#### 故障现象
油位低于下限。

#### 处理
补油至上限。
"""


def doc_of(text: str, doc_id: str = "hx") -> Document:
    return Document(doc_id, text, "HX-200", {"version": "2.1"}, heading_sections(text))


def test_a_block_that_fits_stays_whole():
    chunks = SectionSchemaChunker(max_chars=200).chunk([doc_of(BLOCK)])
    e102 = [c for c in chunks if "E102 油温过高" in c.text]
    assert len(e102) == 1  # symptom, causes, checks and the safety warning in one chunk
    for part in ("故障现象", "可能原因", "检查步骤", "安全警告"):
        assert part in e102[0].text
    assert e102[0].section == "HX-200 维修手册 > 3 故障排除 > E102 油温过高"
    assert e102[0].metadata["section_path"] == ["HX-200 维修手册", "3 故障排除", "E102 油温过高"]
    # the recursive chunker at the same budget cuts the block at every heading
    from rag_lab.chunker import RecursiveChunker

    rec = [c for c in RecursiveChunker(max_chars=200).chunk([doc_of(BLOCK)]) if "E102" in c.section]
    assert len(rec) > 1


def test_a_larger_block_splits_on_sub_headings_with_the_path_carried():
    chunks = SectionSchemaChunker(max_chars=90).chunk([doc_of(BLOCK)])
    pieces = [c for c in chunks if c.section.startswith("HX-200 维修手册 > 3 故障排除 > E102")]
    assert len(pieces) >= 2
    # split on sub-headings: every piece starts at one, small siblings merged while they fit
    for part in ("故障现象", "可能原因", "检查步骤", "安全警告"):
        assert sum(f"#### {part}" in c.text for c in pieces) == 1
    for c in pieces:  # each piece starts at a sub-heading (or the block's own text)
        assert c.text.startswith("#")
        assert c.metadata["section_path"][:3] == ["HX-200 维修手册", "3 故障排除", "E102 油温过高"]
        assert len(c.text) <= 90
    # no chunk is just a heading: "## 3 故障排除" has no body and lives on in the paths
    assert not any(re.fullmatch(r"#+ [^\n]*", c.text) for c in chunks)
    # pieces cover every body line of the block
    body = [ln for ln in BLOCK.splitlines() if ln.strip() and not ln.startswith("#")]
    text = "\n".join(c.text for c in chunks)
    assert all(ln in text for ln in body)


def test_a_table_is_split_only_between_rows():
    b = DocumentBuilder()
    b.heading(1, "HX-200")
    b.heading(2, "5 备件")
    b.paragraph("常用备件如下。")
    rows = [["零件号", "名称", "规格", "更换周期"]] + [
        [f"HX-P{i:02d}", f"零件 {i}", f"Φ{30 + i}×52×8 FKM", f"每 {500 * i} h"]
        for i in range(1, 41)
    ]
    b.table(rows, caption="表 5-1 维护零件清单")
    doc = b.build("parts", "HX-200", {})
    chunks = SectionSchemaChunker(max_chars=300).chunk([doc])
    table_chunks = [c for c in chunks if c.metadata.get("kind") == "table"]
    assert len(table_chunks) > 3
    seen = []
    for c in table_chunks:
        assert len(c.text) <= 300
        for line in c.text.splitlines():
            if line.startswith("|"):
                assert line.endswith("|")  # whole rows only
                seen.append(line)
        assert c.metadata["section_path"] == ["HX-200", "5 备件"]
    for i in range(1, 41):  # every row once, none cut
        assert sum(f"| HX-P{i:02d} |" in line for line in seen) == 1


def test_documents_without_sections_and_oversized_leaves():
    plain = Document("t1", "现象：E102 停泵。" * 60, "ticket")
    chunks = SectionSchemaChunker(max_chars=200).chunk([plain])
    assert len(chunks) > 1 and all(len(c.text) <= 200 for c in chunks)
    assert "".join(c.text for c in chunks) == plain.text
