"""The rule reranker: validity, section/source type weights, the fault-code entity rule."""

from __future__ import annotations

import pytest

from rag_lab.postprocess import PostProcessor
from rag_lab.ranking import ranked
from rag_lab.reranker import RuleReranker
from rag_lab.types import Chunk
from rag_lab.validate import OptionError


def chunk(cid, text, **meta) -> Chunk:
    return Chunk(cid, cid.split("#")[0], text, 0, len(text), "", "", meta)


CHUNKS = {
    c.chunk_id: c
    for c in (
        chunk(
            "v1#0",
            "SV0432 直流母线过电压：检查制动电阻。",
            valid_to="2023-06-30",
            section_type="troubleshooting",
            entity_tags=["SV0432"],
        ),
        chunk(
            "v2#0",
            "SV0432 直流母线过电压：检查制动电阻与接线。",
            valid_from="2023-07-01",
            section_type="troubleshooting",
            entity_tags=["SV0432"],
        ),
        chunk(
            "v2#1",
            "SV0422 编码器通信异常：检查编码器电缆。",
            valid_from="2023-07-01",
            section_type="troubleshooting",
            entity_tags=["SV0422"],
        ),
        chunk(
            "v2#2",
            "安装前请阅读安全须知。",
            valid_from="2023-07-01",
            section_type="safety_warning",
            entity_tags=[],
        ),
        chunk(
            "t#0",
            "现场：SV0432 报警，换制动电阻后正常。",
            source_type="ticket",
            entity_tags=["SV0432"],
        ),
    )
}
QUERIES = {"q": "SV0432 是什么报警"}
RUN = {"q": {"v1#0": 0.9, "v2#1": 0.8, "v2#0": 0.7, "v2#2": 0.6, "t#0": 0.5}}


def test_it_is_a_post_processor_and_pure():
    rr = RuleReranker()
    assert isinstance(rr, PostProcessor)
    before = {q: dict(s) for q, s in RUN.items()}
    rr.process(QUERIES, RUN, CHUNKS)
    assert RUN == before


def test_the_entity_rule_drops_or_demotes_a_contradicting_code():
    out = RuleReranker(section_type_weights={})  # entity rule only
    assert "v2#1" not in out.process(QUERIES, RUN, CHUNKS)["q"]  # SV0422 != SV0432
    assert out.stats["entity_dropped_per_query"] == 1
    demoted = RuleReranker(entity_rule="demote", section_type_weights={}).process(
        QUERIES, RUN, CHUNKS
    )["q"]
    # (0.1 + 0.9 * 0.75) * 0.3 = 0.2325: below v2#2 (0.1 + 0.9 * 0.25 = 0.325), above t#0 (0.1)
    assert ranked(demoted) == ["v1#0", "v2#0", "v2#2", "v2#1", "t#0"]
    kept = RuleReranker(entity_rule="off", section_type_weights={}).process(QUERIES, RUN, CHUNKS)
    assert ranked(kept["q"]) == ranked(RUN["q"])
    # a query naming no code leaves every chunk alone
    plain = RuleReranker(section_type_weights={}).process({"q": "制动电阻怎么检查"}, RUN, CHUNKS)
    assert ranked(plain["q"]) == ranked(RUN["q"])


def test_validity_and_type_weights_multiply_the_normalised_score():
    rr = RuleReranker(
        as_of="2024-06-01",
        expired_factor=0.5,
        section_type_weights={"troubleshooting": 1.3},
        source_type_weights={"ticket": 0.8},
        entity_rule="off",
    )
    out = rr.process(QUERIES, RUN, CHUNKS)["q"]
    norm = {c: 0.1 + 0.9 * (s - 0.5) / 0.4 for c, s in RUN["q"].items()}  # min-max into [0.1, 1]
    assert out["v1#0"] == pytest.approx(norm["v1#0"] * 0.5 * 1.3)  # expired, troubleshooting
    assert out["v2#0"] == pytest.approx(norm["v2#0"] * 1.3)
    assert out["v2#2"] == pytest.approx(norm["v2#2"])  # safety_warning: no weight
    assert out["t#0"] == pytest.approx(norm["t#0"] * 0.8)
    assert ranked(out)[0] == "v2#1"  # valid, troubleshooting, top of the valid ones
    assert ranked(out).index("v2#0") < ranked(out).index("v1#0")  # current version above expired


def test_bad_options_name_the_key():
    with pytest.raises(OptionError, match="as_of"):
        RuleReranker(as_of="2024-13-45")
    with pytest.raises(OptionError, match="entity_rule"):
        RuleReranker(entity_rule="maybe")
    with pytest.raises(OptionError, match="expired_factor"):
        RuleReranker(expired_factor=-1)
