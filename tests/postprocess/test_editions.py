"""Editions by device model and firmware: a query's ``device_model`` / ``firmware`` metadata keeps
the chunks of the edition that covers its device, as ``as_of`` keeps the one valid on its date."""

from __future__ import annotations

import json

import pytest

from rag_lab.postprocess import EditionFilter, PostProcessor
from rag_lab.postprocess.editions import covers_model
from rag_lab.protocols import QueryMetadataAware
from rag_lab.types import Chunk
from rag_lab.validate import OptionError


def chunk(cid: str, **meta: object) -> Chunk:
    return Chunk(cid, cid.split("#")[0], "SV0432 overvoltage threshold", 0, 9, "", "", meta)


CHUNKS = {
    c.chunk_id: c
    for c in (
        chunk("fw-3-2#0", device_models=["SV7"], firmware_from="3.2", firmware_to="3.3"),
        chunk("fw-3-4#0", device_models=["SV7"], firmware_from="3.4"),
        chunk("fw-3-10#0", device_models="SV7-10A", firmware_from="3.10"),
        chunk("hx-2-1#0", device_models=["HX-200"], firmware_from="2.1"),
        chunk("manual#0"),  # names no device: covers every one
    )
}
SCORES = {c: float(10 - i) for i, c in enumerate(CHUNKS)}
QUERIES = {q: "SV0432 threshold" for q in ("old", "new", "big", "none", "hx")}
RUN = {q: dict(SCORES) for q in QUERIES}
META = {
    "old": {"device_model": "SV7-04A", "firmware": "3.3"},
    "new": {"device_model": "sv7 04a", "firmware": "3.4"},
    "big": {"device_model": "SV7-10A", "firmware": "3.10"},
    "none": {},
    "hx": {"device_model": "HX-200"},
}


def test_each_query_keeps_the_edition_of_its_own_device() -> None:
    f = EditionFilter()
    assert isinstance(f, PostProcessor) and isinstance(f, QueryMetadataAware)
    f.set_query_metadata(META)
    out = f.process(QUERIES, RUN, CHUNKS)
    assert list(out["old"]) == ["fw-3-2#0", "manual#0"]
    assert list(out["new"]) == ["fw-3-4#0", "manual#0"]  # case and separators aside
    # 3.10 > 3.4 > 3.2 compared as numbers; SV7-10A's own note and the family's 3.4 note
    assert list(out["big"]) == ["fw-3-4#0", "fw-3-10#0", "manual#0"]
    assert out["none"] == SCORES  # no device: untouched
    assert list(out["hx"]) == ["hx-2-1#0", "manual#0"]  # no firmware: any range of its model
    assert f.stats["device_queries"] == 4
    assert f.stats["other_edition_per_query"] == pytest.approx((3 + 3 + 2 + 0 + 3) / 5)


def test_demote_keeps_every_chunk_below_the_matching_ones() -> None:
    f = EditionFilter(mode="demote")
    f.set_query_metadata(META)
    out = f.process(QUERIES, RUN, CHUNKS)["old"]
    assert list(out) == ["fw-3-2#0", "manual#0", "fw-3-4#0", "fw-3-10#0", "hx-2-1#0"]
    assert list(out.values()) == sorted(out.values(), reverse=True)


def test_the_configured_device_is_the_fallback_and_query_device_false_ignores_metadata() -> None:
    f = EditionFilter(device_model="SV7-02A", firmware="3.2")
    f.set_query_metadata(META)
    out = f.process(QUERIES, RUN, CHUNKS)
    assert list(out["none"]) == ["fw-3-2#0", "manual#0"]
    assert list(out["new"]) == ["fw-3-4#0", "manual#0"]
    g = EditionFilter(device_model="SV7-02A", firmware="3.2", query_device=False)
    g.set_query_metadata(META)
    assert all(
        list(r) == ["fw-3-2#0", "manual#0"] for r in g.process(QUERIES, RUN, CHUNKS).values()
    )


def test_a_query_it_would_empty_keeps_its_run_and_is_counted() -> None:
    f = EditionFilter()
    f.set_query_metadata({"q": {"device_model": "CH-30"}})
    only = {"q": {"fw-3-2#0": 2.0, "hx-2-1#0": 1.0}}
    assert f.process({"q": ""}, only, CHUNKS) == only
    assert f.stats["emptied_queries"] == 1


def test_new_metadata_replaces_the_old() -> None:
    f = EditionFilter()
    f.set_query_metadata(META)
    f.set_query_metadata({})
    assert f.process(QUERIES, RUN, CHUNKS) == RUN


def test_model_families() -> None:
    assert covers_model("SV7", "SV7-04A") and covers_model("sv7-04a", "SV7 04A")
    assert not covers_model("SV7", "SV70-04A") and not covers_model("SV7-04A", "SV7")


def test_bad_options() -> None:
    with pytest.raises(OptionError, match="mode"):
        EditionFilter(mode="hide")
    with pytest.raises(OptionError, match="firmware"):
        EditionFilter(firmware="latest")


def test_editions_end_to_end_on_a_small_corpus(tmp_path) -> None:
    """Two editions of one alarm note (firmware 3.2-3.3 and 3.4 on) and a manual for another
    model, read from Markdown front matter; queries.jsonl names each query's device. With the
    stage, every query's top chunk is its own edition; without it, the same query text ranks
    the two editions alike."""
    from rag_lab.evaluate import evaluate
    from tests.compose import compose_evaluate

    root = tmp_path / "kb"
    (root / "docs").mkdir(parents=True)
    (root / "qrels").mkdir()
    body = "SV0432 DC bus overvoltage: the drive stops when the bus exceeds {v} V."
    for name, front, volts in (
        ("sv7-fw-3-2", "device_models: [SV7]\nfirmware_from: '3.2'\nfirmware_to: '3.3'", 400),
        ("sv7-fw-3-4", "device_models: [SV7]\nfirmware_from: '3.4'", 420),
        ("sp45-manual", "device_models: [SP-45]", 380),
    ):
        (root / "docs" / f"{name}.md").write_text(
            f"---\ndoc_id: {name}\ntitle: SV0432 alarm note\n{front}\n---\n\n"
            f"# SV0432\n\n{body.format(v=volts)}\n",
            encoding="utf-8",
        )
    queries = [
        ("a", "SV7-04A", "3.3", "sv7-fw-3-2"),
        ("b", "SV7-04A", "3.4", "sv7-fw-3-4"),
        ("c", "SV7-10A", "3.2.1", "sv7-fw-3-2"),
        ("d", "SV7-02A", "3.5", "sv7-fw-3-4"),
    ]
    (root / "queries.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "_id": q,
                    "text": "SV0432 DC bus overvoltage",
                    "metadata": {"device_model": m, "firmware": fw},
                }
            )
            + "\n"
            for q, m, fw, _ in queries
        ),
        encoding="utf-8",
    )
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, _, _, d in queries),
        encoding="utf-8",
    )
    common = [
        "dataset=beir",
        f"dataset.path={root}",
        "dataset.corpus=docs",
        "chunker=recursive",
        "retrievers=[bm25]",
        "tracking=none",
        "cache.dir=null",
    ]

    def hit1(extra: list[str], name: str) -> float:
        cfg = compose_evaluate([*common, *extra], tmp_path / name)
        evaluate(cfg)
        metrics = json.loads((tmp_path / name / "run" / "metrics.json").read_text())
        return metrics.get("metrics", metrics)

    with_stage = hit1(["postprocess=[editions]"], "on")
    assert with_stage["hit_rate_at_1"] == 1.0
    assert with_stage["editions/device_queries"] == 4.0
    assert hit1([], "off")["hit_rate_at_1"] < 1.0
