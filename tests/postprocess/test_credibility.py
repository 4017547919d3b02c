"""The credibility rules on the sample's documents: HX-200 manuals (dated, allow-listed, the two
editions corroborate each other where they agree) and the maintenance tickets (dated by
``opened``, not allow-listed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rag_lab.chunker import RecursiveChunker
from rag_lab.parser import JsonlRecordsParser
from rag_lab.parser.base import parse_file
from rag_lab.parser.pdf import PdfParser
from rag_lab.paths import CONFIG_DIR
from rag_lab.pipeline import build
from rag_lab.postprocess import CredibilityFilter, PostProcessor
from rag_lab.protocols import Measured
from rag_lab.ranking import ranked
from rag_lab.types import Chunk
from rag_lab.validate import OptionError

DOCS = Path(__file__).resolve().parents[2] / "rag_lab/sample/maintenance_kb/docs"
TICKET = "TCK-2022-0815#0"  # HX-200 E102 in summer: dated (opened), a ticket
V1, V2 = "hx200-manual-v1#3", "hx200-manual-v2#3"  # the two specification tables (identical)
PLAN = "hx200-manual-v2#6"  # E102 in v2: nothing in V1/V2/TICKET states its facts


@pytest.fixture(scope="module")
def chunks() -> dict[str, Chunk]:
    # conf/parser/jsonl_records.yaml's reading of the ticket dump
    tickets = JsonlRecordsParser(
        id_field="_id", text_fields=["text"], title_field="title", metadata_field="metadata"
    )
    files = [
        (PdfParser(ocr="off"), "manuals/hx200-manual-v1.pdf"),
        (PdfParser(ocr="off"), "manuals/hx200-manual-v2.pdf"),
        (tickets, "tickets.jsonl"),
    ]
    docs = [d for p, f in files for _, d in parse_file(p, DOCS / f, DOCS).documents]
    contract = build.instantiate(
        OmegaConf.load(Path(CONFIG_DIR) / "contract/schema.yaml"), "contract"
    )
    docs = list(contract.check(docs, {}).documents)
    return {c.chunk_id: c for c in RecursiveChunker().chunk(docs)}


def test_signals_on_real_documents(chunks):
    f = CredibilityFilter()
    top = [chunks[c] for c in (V1, V2, TICKET, PLAN)]
    assert f.signals(chunks[V1], top) == {"dated": True, "allowed": True, "corroborated": True}
    assert f.signals(chunks[TICKET], top) == {
        "dated": True,  # opened: 2022-08-15
        "allowed": False,
        "corroborated": False,
    }
    assert f.signals(chunks[PLAN], top)["corroborated"] is False
    # without the other edition, the spec table stands alone
    assert f.signals(chunks[V1], [chunks[V1], chunks[TICKET]])["corroborated"] is False
    assert f.score(chunks[V1], top) == 1.0
    assert f.score(chunks[TICKET], top) == pytest.approx(1 / 3)
    assert f.score(chunks[PLAN], top) == pytest.approx(2 / 3)


def test_weights_change_the_score(chunks):
    top = [chunks[c] for c in (V1, V2, TICKET)]
    f = CredibilityFilter(weights={"dated": 2.0, "allowed": 1.0})  # corroborated: off (0)
    assert f.weights["corroborated"] == 0.0
    assert f.score(chunks[TICKET], top) == pytest.approx(2 / 3)
    assert f.signals(chunks[V1], top)["corroborated"] is False
    ours = CredibilityFilter(allowed_source_types=[], allowed_sources=["tickets"])
    assert ours.signals(chunks[TICKET], top)["allowed"] is True
    assert ours.signals(chunks[V1], top)["allowed"] is False


def test_demote_moves_low_chunks_below_the_rest_in_order(chunks):
    f = CredibilityFilter(threshold=0.5, mode="demote")
    assert isinstance(f, PostProcessor) and isinstance(f, Measured)
    run = {"q": {TICKET: 4.0, V1: 3.0, PLAN: 2.0, V2: 1.0}}
    out = f.process({"q": ""}, run, chunks)
    assert ranked(out["q"]) == [V1, PLAN, V2, TICKET]
    assert run == {"q": {TICKET: 4.0, V1: 3.0, PLAN: 2.0, V2: 1.0}}  # pure
    assert f.stats["below_threshold_per_query"] == 1.0
    assert f.stats["mean_score"] == pytest.approx((1 / 3 + 1 + 2 / 3 + 1) / 4)


def test_drop_removes_them_but_never_empties_a_query(chunks):
    f = CredibilityFilter(threshold=0.5, mode="drop")
    out = f.process({"a": "", "b": ""}, {"a": {TICKET: 2.0, V1: 1.0}, "b": {TICKET: 1.0}}, chunks)
    assert out == {"a": {V1: 1.0}, "b": {TICKET: 1.0}}
    assert f.stats["emptied_queries"] == 1.0
    # threshold 0 keeps everything in place
    keep = CredibilityFilter(threshold=0.0, mode="drop")
    assert keep.process({"a": ""}, {"a": {TICKET: 2.0, V1: 1.0}}, chunks) == {
        "a": {TICKET: 2.0, V1: 1.0}
    }


@pytest.mark.parametrize(
    "kwargs",
    [
        {"weights": {"dated": 1.0, "popular": 1.0}},
        {"weights": {"dated": 0.0, "allowed": 0.0, "corroborated": 0.0}},
        {"weights": {"dated": -1.0}},
        {"mode": "hide"},
        {"threshold": -0.1},
        {"corroboration_n": 0},
    ],
)
def test_bad_options_are_one_line_errors(kwargs):
    with pytest.raises(OptionError):
        CredibilityFilter(**kwargs)
