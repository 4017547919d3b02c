"""rag_lab.dataset.beir: loading the BEIR-layout toy dataset, its fingerprint, and errors that
name the file and line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rag_lab.dataset import BeirDataset, read_qrels, read_queries
from rag_lab.errors import DataError


@pytest.fixture
def toy_copy(tmp_path, toy_path) -> Path:
    dst = tmp_path / "toy"
    shutil.copytree(toy_path, dst)
    return dst


def test_load_test_split(toy_path):
    ds = BeirDataset(str(toy_path)).load()
    assert (ds.name, ds.split) == ("toy", "test")
    assert sorted(ds.queries) == [f"q{i}" for i in range(1, 9)]  # q9 is only judged in dev
    assert set(ds.qrels) == set(ds.queries)
    assert ds.qrels["q8"] == {"d1": 2, "d3": 1}
    assert ds.qrels["q7"] == {"d4": 0}
    assert ds.corpus_sources == (toy_path / "corpus.jsonl",) and ds.corpus_root == toy_path
    q1 = ds.queries["q1"]
    assert q1.text == "What does E102 mean on the HX-200?"
    assert q1.category == "exact_code" and q1.evidence == ("70 °C",)
    assert ds.queries["q7"].evidence == ()


def test_split_selection(toy_path):
    dev = BeirDataset(str(toy_path), split="dev", name="toy-dev").load()
    assert dev.name == "toy-dev" and dev.split == "dev"
    assert list(dev.queries) == ["q9"] and dev.qrels == {"q9": {"d8": 2}}
    assert dev.warnings == ()


def test_unanswerable_queries_counted_in_warnings(toy_path):
    ds = BeirDataset(str(toy_path)).load()
    n = sum(1 for g in ds.qrels.values() if not any(v > 0 for v in g.values()))
    assert n == 1
    assert any(w.startswith(f"{n} queries have no relevant document") for w in ds.warnings)


def test_queries_missing_from_queries_file_are_warned_and_skipped(toy_copy):
    with open(toy_copy / "qrels" / "test.tsv", "a", encoding="utf-8") as fh:
        fh.write("q99\td1\t1\n")
    ds = BeirDataset(str(toy_copy)).load()
    assert "q99" not in ds.queries and "q99" not in ds.qrels
    assert any("1 queries in test.tsv are not in queries.jsonl" in w for w in ds.warnings)


def test_fingerprint_stable_and_content_sensitive(toy_path, toy_copy):
    fp = BeirDataset(str(toy_path)).load().fingerprint
    assert BeirDataset(str(toy_path)).load().fingerprint == fp
    assert BeirDataset(str(toy_copy)).load().fingerprint == fp  # names do not count, bytes do
    assert BeirDataset(str(toy_path), split="dev").load().fingerprint != fp  # qrels file differs
    corpus = toy_copy / "corpus.jsonl"
    data = corpus.read_bytes()
    corpus.write_bytes(data.replace(b"70 \xc2\xb0C", b"71 \xc2\xb0C", 1))
    assert corpus.read_bytes() != data
    assert BeirDataset(str(toy_copy)).load().fingerprint != fp


def test_corpus_folder(toy_copy):
    folder = toy_copy / "docs"
    folder.mkdir()
    (folder / "b.md").write_text("# B\n", encoding="utf-8")
    (folder / "a.txt").write_text("A\n", encoding="utf-8")
    (folder / ".hidden").write_text("x", encoding="utf-8")
    ds = BeirDataset(str(toy_copy), corpus="docs").load()
    assert ds.corpus_root == folder and ds.corpus_sources == (folder / "a.txt", folder / "b.md")
    (folder / "a.txt").unlink()
    (folder / "b.md").unlink()
    with pytest.raises(DataError, match="corpus folder is empty"):
        BeirDataset(str(toy_copy), corpus="docs").load()
    with pytest.raises(DataError, match="corpus not found"):
        BeirDataset(str(toy_copy), corpus="nope.jsonl").load()


def test_missing_folder(tmp_path):
    with pytest.raises(DataError, match="dataset folder not found"):
        BeirDataset(str(tmp_path / "absent")).load()


def test_missing_qrels_split_lists_available(toy_path):
    with pytest.raises(DataError, match=r"train\.tsv.*splits available: dev, test"):
        BeirDataset(str(toy_path), split="train").load()


def test_missing_queries_file(toy_copy):
    (toy_copy / "queries.jsonl").unlink()
    with pytest.raises(DataError, match="queries file not found"):
        BeirDataset(str(toy_copy)).load()


def test_malformed_queries_line_names_file_and_line(toy_copy):
    path = toy_copy / "queries.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2][:-1]  # drop the closing brace of line 3
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"queries\.jsonl:3: malformed JSON"):
        BeirDataset(str(toy_copy)).load()


def test_queries_errors(tmp_path):
    path = tmp_path / "queries.jsonl"
    path.write_text(
        '{"_id": "q1", "text": "a"}\n{"_id": "q2", "text": "b"}\n{"_id": "q1", "text": "c"}\n',
        encoding="utf-8",
    )
    with pytest.raises(DataError, match=r"queries\.jsonl:3: duplicate query id 'q1'"):
        read_queries(path)
    path.write_text('{"_id": "q1"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"queries\.jsonl:1: missing required key 'text'"):
        read_queries(path)
    path.write_text('{"_id": 7, "text": "a", "metadata": "x"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"queries\.jsonl:1: 'metadata' must be an object"):
        read_queries(path)
    path.write_text('{"_id": 7, "text": "a"}\n', encoding="utf-8")
    assert list(read_queries(path)) == ["7"]  # ids are strings


def test_qrels_errors(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\thigh\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test\.tsv:3: score 'high' is not a finite number"):
        read_qrels(path)
    path.write_text("q1\td1\t1\nq1\td1\t2\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test\.tsv:2: duplicate judgment"):
        read_qrels(path)
    path.write_text("q1\td1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test\.tsv:1: expected 3 tab-separated columns"):
        read_qrels(path)
    path.write_text("query-id\tcorpus-id\tscore\n\n", encoding="utf-8")
    with pytest.raises(DataError, match="no judgments"):
        read_qrels(path)
    path.write_text("q1\td1\t2.0\nq2\td2\t0\n", encoding="utf-8")  # no header, float grades
    assert read_qrels(path) == {"q1": {"d1": 2}, "q2": {"d2": 0}}


def test_qrels_non_numeric_score_in_dataset_names_file_and_line(toy_copy):
    path = toy_copy / "qrels" / "test.tsv"
    lineno = len(path.read_text(encoding="utf-8").splitlines()) + 1
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("q9\td8\tyes\n")
    with pytest.raises(DataError, match=rf"test\.tsv:{lineno}: score 'yes' is not a finite number"):
        BeirDataset(str(toy_copy)).load()


def test_qrels_infinite_score_names_file_and_line(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("q1\td1\tinf\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test\.tsv:1"):
        read_qrels(path)
