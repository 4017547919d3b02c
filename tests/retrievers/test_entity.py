"""The entity retriever: chunks ranked by the entities they name (tags, patterns, dictionary),
rare entities first, related entities at a lower weight, part-of-speech candidates, persistence,
and the three-way weighted hybrid on the sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rag_lab.paths import CONFIG_DIR
from rag_lab.retrievers import EntityRetriever, PersistentRetriever, Retriever
from rag_lab.types import Chunk

# the shipped contract's patterns (codes, models, part numbers), as conf/retrievers/entity.yaml
PATTERNS = yaml.safe_load((Path(CONFIG_DIR) / "contract" / "schema.yaml").read_text())[
    "entity_patterns"
]


def chunk(cid: str, text: str, tags: list[str] | None = None, section: str = "") -> Chunk:
    meta = {} if tags is None else {"entity_tags": tags}
    return Chunk(cid, cid.split("#")[0], text, 0, len(text), "", section, meta)


CHUNKS = [
    chunk("hx#0", "HX-200 overview: the unit supplies oil at 16 MPa.", ["HX-200"]),
    chunk("hx#1", "HX-200 fault table: E101 overload, E102 oil too hot.", ["HX-200"]),
    chunk("hx#2", "HX-200 filter element HX-RF10, change every 750 h."),
    chunk("sp#0", "SP-45 spindle E120 bearing temperature too high."),
    chunk("sp#1", "Other text with no entity at all."),
]


@pytest.fixture
def dictionary(tmp_path) -> Path:
    path = tmp_path / "entities.yaml"
    path.write_text(
        "HX-200: {kind: model, aliases: [液压站]}\n"
        "回油滤芯: {kind: component, aliases: [return filter], related: [HX-RF10, E108]}\n",
        encoding="utf-8",
    )
    return path


def retriever(dictionary: Path | None, **kw) -> EntityRetriever:
    r = EntityRetriever(str(dictionary) if dictionary else None, PATTERNS, **kw)
    r.index(CHUNKS)
    return r


def test_a_chunk_is_found_by_the_code_it_names_and_rare_entities_weigh_more(dictionary):
    r = retriever(dictionary, pos=False)
    assert isinstance(r, Retriever) and isinstance(r, PersistentRetriever)
    run = r.retrieve({"q": "E102 on the 液压站"}, k=10)["q"]
    # hx#1 names both; the other HX-200 chunks only the common model
    assert max(run, key=run.get) == "hx#1"
    assert set(run) == {"hx#0", "hx#1", "hx#2"}
    assert run["hx#0"] == pytest.approx(run["hx#2"])
    assert run["hx#0"] < run["hx#1"]
    # the text's own codes count even where the chunk's tags lack them (hx#1 is tagged HX-200 only)
    assert r.retrieve({"q": "E101"}, k=10)["q"].keys() == {"hx#1"}


def test_a_query_without_entities_gets_an_empty_run(dictionary):
    r = retriever(dictionary, pos=False)
    assert r.retrieve({"q": "how hot may the oil get"}, k=10) == {"q": {}}
    assert r.stats["queries_with_entities"] == 0.0


def test_related_entities_join_the_query_at_their_weight(dictionary):
    wanted = retriever(dictionary, pos=False).query_entities("回油滤芯多久换")
    assert wanted == {"回油滤芯": 1.0, "hxrf10": 0.5, "e108": 0.5}
    run = retriever(dictionary, pos=False).retrieve({"q": "回油滤芯多久换"}, k=10)["q"]
    assert set(run) == {"hx#2"}  # named nowhere by the alias, found through its part number
    off = retriever(dictionary, pos=False, relation_weight=0)
    assert off.retrieve({"q": "回油滤芯多久换"}, k=10) == {"q": {}}


def test_part_of_speech_finds_an_entity_written_without_its_hyphen(dictionary):
    query = {"q": "SP45 主轴报警"}
    assert retriever(dictionary, pos=False).retrieve(query, k=5) == {"q": {}}
    assert set(retriever(dictionary, pos=True).retrieve(query, k=5)["q"]) == {"sp#0"}


def test_k_cuts_the_run_and_ties_go_to_corpus_order(dictionary):
    run = retriever(dictionary, pos=False).retrieve({"q": "HX-200"}, k=2)["q"]
    assert list(run) == ["hx#0", "hx#1"]


def test_the_index_is_saved_and_restored(dictionary, tmp_path):
    r = retriever(dictionary, pos=False)
    folder = tmp_path / "idx"
    folder.mkdir()
    r.save_index(folder)
    assert json.loads((folder / "entities.json").read_text())["ids"] == r.chunk_ids
    again = EntityRetriever(str(dictionary), PATTERNS, pos=False)
    again.load_index(folder)
    q = {"q": "E102 回油滤芯"}
    assert again.retrieve(q, k=10) == r.retrieve(q, k=10)


def test_the_identity_follows_the_dictionary(dictionary):
    a = EntityRetriever(str(dictionary), PATTERNS).identity
    dictionary.write_text("HX-200: {aliases: [油站]}\n", encoding="utf-8")
    assert EntityRetriever(str(dictionary), PATTERNS).identity != a
    assert EntityRetriever(None, PATTERNS).identity != a


@pytest.mark.slow
def test_the_three_way_hybrid_runs_on_the_sample(tmp_path):
    """experiment=sample_entity end to end (hashing embedder): the entity retriever is fused by
    weight with dense and BM25, its stats are logged, and exact-code queries stay all hits."""
    import pandas as pd

    from rag_lab.evaluate import evaluate
    from tests.compose import compose_evaluate

    cfg = compose_evaluate(
        ["experiment=sample_entity", "embedder=hashing", "tracking=none"], tmp_path
    )
    evaluate(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    flat = metrics.get("metrics", metrics)
    assert flat["entity/queries_with_entities"] > 0.5
    assert flat["entity/n_entities"] > 100
    table = pd.read_parquet(tmp_path / "run" / "per_query.parquet")
    exact = table[table["category"] == "exact_code"]
    assert exact["hit_rate_at_5"].mean() == 1.0


def test_an_export_with_the_entity_path_rescores_the_same(tmp_path):
    """BM25 + entity on the toy set (a dictionary file bundled into the export): the export's
    saved entity index gives the run's metrics back."""
    from rag_lab.evaluate import evaluate
    from rag_lab.export import evaluate_exported, export_pipeline
    from tests.compose import TOY_OVERRIDES, compose_evaluate
    from tests.export.roundtrip import assert_same_outputs

    dictionary = tmp_path / "entities.yaml"
    dictionary.write_text("HX-200: {aliases: [hydraulic unit], related: [E102]}\n", "utf-8")
    cfg = compose_evaluate(
        [
            *TOY_OVERRIDES,
            "retrievers=[bm25,entity]",
            f"retrievers.entity.dictionary={dictionary}",
            "fusion=rrf",
            "tracking=none",
        ],
        tmp_path,
    )
    metrics = evaluate(cfg)
    assert metrics["entity/n_entities"] > 0
    out = export_pipeline(Path(cfg.paths.output_dir), tmp_path / "export")
    assert any(p.name.endswith("entities.yaml") for p in (out / "files").iterdir())
    again = evaluate_exported(out, out_dir=tmp_path / "again")
    assert_same_outputs(metrics, again)
