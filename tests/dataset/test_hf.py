"""rag_lab.dataset.hf: BEIR-style sets through HF ``datasets`` from files the tests write (parquet,
``save_to_disk`` folders, one file per part), the column mapping, and one-line errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import datasets
from rag_lab.dataset import BeirDataset, HfDataset
from rag_lab.errors import ConfigError, DataError
from rag_lab.evaluate import evaluate
from tests.compose import TOY, compose_evaluate

datasets.disable_progress_bars()


def toy_tables() -> tuple[list[dict], list[dict], dict[str, list[dict]]]:
    """The toy BEIR set as mteb's three tables (corpus, queries, qrels per split)."""
    corpus = [json.loads(line) for line in open(TOY / "corpus.jsonl", encoding="utf-8")]
    corpus = [{"_id": c["_id"], "title": c["title"], "text": c["text"]} for c in corpus]
    queries = [json.loads(line) for line in open(TOY / "queries.jsonl", encoding="utf-8")]
    queries = [{"_id": q["_id"], "text": q["text"]} for q in queries]
    qrels = {}
    for split in ("test", "dev"):
        with open(TOY / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
            rows = list(csv.reader(fh, delimiter="\t"))[1:]
        qrels[split] = [{"query-id": q, "corpus-id": d, "score": int(s)} for q, d, s in rows]
    return corpus, queries, qrels


@pytest.fixture
def parquet_set(tmp_path) -> Path:
    """``corpus.parquet``, ``queries.parquet`` and ``default/`` (a DatasetDict of qrels splits)."""
    corpus, queries, qrels = toy_tables()
    root = tmp_path / "toy_parquet"
    root.mkdir()
    datasets.Dataset.from_list(corpus).to_parquet(str(root / "corpus.parquet"))
    datasets.Dataset.from_list(queries).to_parquet(str(root / "queries.parquet"))
    splits = {s: datasets.Dataset.from_list(rows) for s, rows in qrels.items()}
    datasets.DatasetDict(splits).save_to_disk(str(root / "default"))
    return root


@pytest.fixture
def saved_set(tmp_path) -> Path:
    """Every part a ``save_to_disk`` folder: ``corpus/``, ``queries/`` (Datasets), ``default/``."""
    corpus, queries, qrels = toy_tables()
    root = tmp_path / "toy_saved"
    datasets.Dataset.from_list(corpus).save_to_disk(str(root / "corpus"))
    datasets.Dataset.from_list(queries).save_to_disk(str(root / "queries"))
    splits = {s: datasets.Dataset.from_list(rows) for s, rows in qrels.items()}
    datasets.DatasetDict(splits).save_to_disk(str(root / "default"))
    return root


def load(path: Path, tmp_path: Path, **kw) -> object:
    return HfDataset(str(path), materialise_dir=str(tmp_path / "mat"), **kw).load()


def test_parquet_set_gives_the_beir_loaders_labels(parquet_set, tmp_path):
    beir = BeirDataset(str(TOY)).load()
    ds = load(parquet_set, tmp_path)
    assert (ds.name, ds.split) == ("toy_parquet", "test")
    assert ds.qrels == beir.qrels and ds.qrels["q7"] == {"d4": 0}  # grade-0 near miss kept
    assert {q: x.text for q, x in ds.queries.items()} == {
        q: x.text for q, x in beir.queries.items()
    }
    assert any(w.startswith("1 queries have no relevant document") for w in ds.warnings)
    # the corpus is a BEIR corpus.jsonl the parser reads, in a content-addressed folder
    (src,) = ds.corpus_sources
    assert src.name == "corpus.jsonl" and src.parent == ds.corpus_root
    assert src.parent.parent == tmp_path / "mat" and src.parent.name.startswith("toy_parquet-")
    written = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
    assert [r["_id"] for r in written] == [f"d{i}" for i in range(1, 9)]
    assert written[0]["text"].startswith("Fault E102 means the hydraulic oil is too hot.")


def test_dev_split_and_fingerprint_is_what_was_read(parquet_set, saved_set, tmp_path):
    dev = load(parquet_set, tmp_path, split="dev")
    assert list(dev.queries) == ["q9"] and dev.qrels == {"q9": {"d8": 2}}
    test = load(parquet_set, tmp_path)
    # parquet and save_to_disk copies of the same set read the same: same fingerprints, one folder
    again = load(saved_set, tmp_path, name="toy_parquet")
    assert again.fingerprint == test.fingerprint
    assert again.corpus_fingerprint == test.corpus_fingerprint
    assert again.corpus_sources == test.corpus_sources
    assert dev.fingerprint != test.fingerprint  # other labels
    assert dev.corpus_fingerprint == test.corpus_fingerprint  # same corpus: nothing re-embeds


def test_a_changed_document_changes_both_fingerprints(parquet_set, tmp_path):
    before = load(parquet_set, tmp_path)
    corpus, _, _ = toy_tables()
    corpus[0]["text"] = "Fault E102 means the oil is too hot."
    datasets.Dataset.from_list(corpus).to_parquet(str(parquet_set / "corpus.parquet"))
    after = load(parquet_set, tmp_path)
    assert after.fingerprint != before.fingerprint
    assert after.corpus_fingerprint != before.corpus_fingerprint
    assert after.corpus_sources != before.corpus_sources  # a new folder; the old one is intact
    assert before.corpus_sources[0].read_text(encoding="utf-8") != after.corpus_sources[
        0
    ].read_text(encoding="utf-8")


def test_field_mapping_and_one_file_per_part(tmp_path):
    """Other column names and each part in its own file (a jsonl, an arrow file, a parquet)."""
    corpus, queries, qrels = toy_tables()
    root = tmp_path / "renamed"
    root.mkdir()
    rows = [{"doc": c["_id"], "heading": c["title"], "body": c["text"]} for c in corpus]
    datasets.Dataset.from_list(rows).to_json(str(root / "docs.jsonl"), force_ascii=False)
    saved = root / "questions_saved"
    datasets.Dataset.from_list(
        [{"qid": q["_id"], "question": q["text"]} for q in queries]
    ).save_to_disk(str(saved))
    (arrow,) = saved.glob("*.arrow")
    judged = [{"q": r["query-id"], "d": r["corpus-id"], "rel": r["score"]} for r in qrels["test"]]
    datasets.Dataset.from_list(judged).to_parquet(str(root / "judged.parquet"))
    ds = HfDataset(
        str(root),
        corpus={"path": "docs.jsonl", "id": "doc", "title": "heading", "text": "body"},
        queries={"path": str(arrow), "id": "qid", "text": "question"},
        qrels={"path": "judged.parquet", "query_id": "q", "corpus_id": "d", "score": "rel"},
        materialise_dir=str(tmp_path / "mat"),
    ).load()
    assert ds.qrels == BeirDataset(str(TOY)).load().qrels
    first = json.loads(ds.corpus_sources[0].read_text(encoding="utf-8").splitlines()[0])
    assert first == {"_id": "d1", "title": corpus[0]["title"], "text": corpus[0]["text"]}
    # no title column at all: title=null
    datasets.Dataset.from_list([{"doc": "d1", "body": "x"}]).to_parquet(str(root / "bare.parquet"))
    bare = HfDataset(
        str(root),
        corpus={"path": "bare.parquet", "id": "doc", "title": None, "text": "body"},
        queries={"path": str(arrow), "id": "qid", "text": "question"},
        qrels={"path": "judged.parquet", "query_id": "q", "corpus_id": "d", "score": "rel"},
        materialise_dir=str(tmp_path / "mat"),
    ).load()
    assert json.loads(bare.corpus_sources[0].read_text(encoding="utf-8")) == {
        "_id": "d1",
        "title": "",
        "text": "x",
    }


def test_a_missing_column_names_the_source_and_the_key(parquet_set, tmp_path):
    with pytest.raises(ConfigError) as err:
        load(parquet_set, tmp_path, corpus={"text": "abstract"})
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("dataset.corpus.text='abstract': no such column in ")
    assert str(parquet_set / "corpus.parquet") in msg and "columns: _id, title, text" in msg
    with pytest.raises(ConfigError, match=r"dataset\.qrels\.score='grade': .*default.*'test'"):
        load(parquet_set, tmp_path, qrels={"score": "grade"})
    with pytest.raises(ConfigError, match=r"dataset\.queries\.question: unknown key"):
        HfDataset(str(parquet_set), queries={"question": "text"})


def test_bad_values_and_missing_parts(parquet_set, tmp_path):
    with pytest.raises(DataError, match=r"default.*no split 'train' \(splits: test, dev\)"):
        load(parquet_set, tmp_path, split="train")
    corpus, _, _ = toy_tables()
    datasets.Dataset.from_list([*corpus, corpus[2]]).to_parquet(str(parquet_set / "corpus.parquet"))
    with pytest.raises(
        DataError, match=r"corpus\.parquet: row 8: duplicate corpus id 'd3' \(first"
    ):
        load(parquet_set, tmp_path)
    with pytest.raises(DataError, match=r"dataset\.corpus: cannot read .*nowhere"):
        load(tmp_path / "nowhere_at_all", tmp_path)


def test_a_hub_id_offline_is_one_line(monkeypatch, tmp_path):
    """The hub code path (``mteb/scifact``): offline it fails in one line naming the id."""
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # no local folder called mteb/scifact
    with pytest.raises(DataError) as err:
        HfDataset("mteb/scifact", materialise_dir=str(tmp_path / "mat")).load()
    assert str(err.value).startswith(
        "dataset.corpus: cannot read mteb/scifact (config 'corpus', split 'corpus'):"
    )
    assert "\n" not in str(err.value)


def test_evaluate_through_dataset_hf_matches_dataset_beir(parquet_set, tmp_path):
    """The whole run: ``dataset=hf`` on the parquet copy scores exactly as ``dataset=beir``."""
    common = ["retrievers=[bm25]", "tokenizer=jieba", "tracking=none", "cache.dir=null"]
    beir = evaluate(
        compose_evaluate(["dataset=beir", f"dataset.path={TOY}", *common], tmp_path / "beir")
    )
    hf = evaluate(
        compose_evaluate(["dataset=hf", f"dataset.path={parquet_set}", *common], tmp_path / "hf")
    )
    for key in ("ndcg_at_10", "hit_rate_at_5", "recall_at_10", "mrr_at_10", "noise_ratio_at_5"):
        assert hf[key] == beir[key], key
    assert hf["n_documents"] == beir["n_documents"] == 8


MTEB_README = """---
configs:
- config_name: corpus
  data_files:
  - split: corpus
    path: corpus/corpus-00000-of-00001.parquet
- config_name: queries
  data_files:
  - split: queries
    path: queries/queries-00000-of-00001.parquet
- config_name: default
  data_files:
  - split: test
    path: data/test-00000-of-00001.parquet
  - split: dev
    path: data/dev-00000-of-00001.parquet
---
"""


def test_a_local_copy_of_an_mteb_hub_repository(tmp_path):
    """The mteb layout on disk (parquet shards + README config table), read with the defaults."""
    corpus, queries, qrels = toy_tables()
    repo = tmp_path / "scifact_snapshot"
    for sub in ("corpus", "queries", "data"):
        (repo / sub).mkdir(parents=True)
    (repo / "README.md").write_text(MTEB_README)
    datasets.Dataset.from_list(corpus).to_parquet(
        str(repo / "corpus/corpus-00000-of-00001.parquet")
    )
    datasets.Dataset.from_list(queries).to_parquet(
        str(repo / "queries/queries-00000-of-00001.parquet")
    )
    for split, rows in qrels.items():
        datasets.Dataset.from_list(rows).to_parquet(
            str(repo / f"data/{split}-00000-of-00001.parquet")
        )
    ds = load(repo, tmp_path)
    assert ds.qrels == BeirDataset(str(TOY)).load().qrels
    assert load(repo, tmp_path, split="dev").qrels == {"q9": {"d8": 2}}
