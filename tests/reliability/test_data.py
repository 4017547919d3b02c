"""Bad input data (issue 13): every case reproduced through ``rag-lab evaluate`` on an altered copy
of the toy dataset, plus the loader-level detail (file:line, both lines of a duplicate).

Each CLI case runs ``rag-lab evaluate dataset=beir dataset.path=<copy> embedder=hashing
tracking=none cache.dir=null`` in a fresh interpreter, as a user does.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from rag_lab.dataset import BeirDataset, read_qrels
from rag_lab.errors import ConfigError, DataError
from rag_lab.parser import JsonlRecordsParser, MarkdownParser
from rag_lab.pipeline.corpus import parse_corpus, read_corpus
from tests.cli.helpers import cli, error_line
from tests.compose import TOY


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A writable copy of the toy BEIR dataset."""
    return Path(shutil.copytree(TOY, tmp_path / "data"))


def evaluate(data: Path, *extra: str):
    return cli(
        "evaluate",
        "dataset=beir",
        f"dataset.path={data}",
        "embedder=hashing",
        "tracking=none",
        "cache.dir=null",
        f"hydra.run.dir={data.parent / 'run'}",
        *extra,
    )


def metrics(data: Path) -> dict:
    return json.loads((data.parent / "run" / "metrics.json").read_text())


def append(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


# -- 1. fractional qrels grades -------------------------------------------------------------------


def test_fractional_grades_are_kept_not_truncated(data):
    qrels = data / "qrels" / "test.tsv"
    text = qrels.read_text(encoding="utf-8")
    qrels.write_text(text.replace("q1\td1\t2", "q1\td1\t0.5").replace("q2\td2\t2", "q2\td2\t1.7"))
    proc = evaluate(data)
    assert proc.returncode == 0, proc.stderr
    # before: int(float("0.5")) == 0 made q1 unanswerable (2 unanswerable queries, not 1)
    assert metrics(data)["n_unanswerable"] == 1
    table = pd.read_parquet(data.parent / "run" / "per_query.parquet").set_index("query_id")
    assert table.loc["q1", "n_relevant"] == 1 and not math.isnan(table.loc["q1", "ndcg_at_10"])
    grades = read_qrels(qrels)
    assert grades["q1"]["d1"] == 0.5 and grades["q2"]["d2"] == 1.7
    assert grades["q3"]["d4"] == 2 and isinstance(grades["q3"]["d4"], int)


@pytest.mark.parametrize("score", ["nan", "inf", "-inf", "1e400", "abc", ""])
def test_non_finite_grade_names_file_and_line(tmp_path, score):
    path = tmp_path / "test.tsv"
    path.write_text(f"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t{score}\n")
    with pytest.raises(DataError, match=rf"test\.tsv:3: score '{score}' is not a finite number"):
        read_qrels(path)


# -- 2. encodings ---------------------------------------------------------------------------------


def to_gbk(path: Path, extra: str) -> None:
    text = path.read_text(encoding="utf-8") + extra + "\n"
    path.write_bytes(text.encode("gbk"))


@pytest.mark.parametrize("name", ["corpus.jsonl", "queries.jsonl"])
def test_gbk_file_is_one_line_error_with_the_conversion(data, name):
    extra = json.dumps({"_id": "zh1", "text": "液压油温度过高，检查冷却风扇。"}, ensure_ascii=False)
    to_gbk(data / name, extra)
    proc = evaluate(data)
    assert proc.returncode == 2
    # before: a UnicodeDecodeError traceback (exit 1)
    line = error_line(proc)
    assert f"{data / name}:1: not UTF-8 text (byte 0xa1)" in line  # "°C" is the first GBK byte
    assert f"iconv -f gbk -t utf-8 {name} > " in line


def test_utf8_bom_is_accepted_in_qrels_corpus_and_queries(data, tmp_path):
    proc = evaluate(data)
    assert proc.returncode == 0, proc.stderr
    plain = metrics(data)
    for path in [data / "qrels" / "test.tsv", data / "corpus.jsonl", data / "queries.jsonl"]:
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    shutil.rmtree(data.parent / "run")
    proc = evaluate(data)
    # before: "qrels/test.tsv:1: score 'score' is not a finite number" (the BOM hid the header),
    # and "queries.jsonl:1: malformed JSON (Unexpected UTF-8 BOM ...)"
    assert proc.returncode == 0, proc.stderr
    with_bom = metrics(data)
    keys = ["n_documents", "n_queries", "ndcg_at_10", "recall_at_10", "mrr_at_10"]
    assert {k: with_bom[k] for k in keys} == {k: plain[k] for k in keys}


def test_bom_before_markdown_front_matter(tmp_path):
    path = tmp_path / "m.md"
    path.write_bytes(b"\xef\xbb\xbf---\ndoc_id: m1\ntitle: T\n---\n# H\nbody\n")
    (doc,) = MarkdownParser().parse(path, tmp_path)
    assert (doc.doc_id, doc.title, doc.text) == ("m1", "T", "# H\nbody\n")


# -- 3. empty corpus file -------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "\n\n   \n"])
def test_empty_corpus_file_says_no_records_naming_it(data, content):
    (data / "corpus.jsonl").write_text(content)
    proc = evaluate(data)
    assert proc.returncode == 2
    # before: "empty corpus under <dir>: no files" although the file is there
    assert error_line(proc) == (f"error: {data / 'corpus.jsonl'}: no records (empty corpus file)")


def test_corpus_folder_of_empty_files_says_no_records(tmp_path):
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text("")
    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    with pytest.raises(DataError, match=r"no records in any of 2 files \(e\.g\. .*a\.jsonl\)"):
        parse_corpus(JsonlRecordsParser(), files, tmp_path)


# -- 4. duplicate ids -----------------------------------------------------------------------------


def test_duplicate_doc_id_names_both_lines(data):
    corpus = data / "corpus.jsonl"
    append(corpus, corpus.read_text(encoding="utf-8").splitlines()[1])  # d2 again, line 9
    proc = evaluate(data)
    assert proc.returncode == 2
    # before: "duplicate document id 'd2' in <file> (first seen in <file>)": no lines
    assert error_line(proc) == (
        f"error: {corpus}:9: duplicate document id 'd2' (first at {corpus}:2)"
    )


def test_duplicate_doc_id_across_files_names_both(tmp_path):
    one = tmp_path / "one.jsonl"
    two = tmp_path / "two.jsonl"
    one.write_text('{"_id": "x", "text": "a"}\n')
    two.write_text('{"_id": "y", "text": "b"}\n\n{"_id": "x", "text": "c"}\n')
    with pytest.raises(DataError) as exc:
        parse_corpus(JsonlRecordsParser(), [one, two], tmp_path)
    assert str(exc.value) == f"{two}:3: duplicate document id 'x' (first at {one}:1)"


def test_duplicate_query_id_names_both_lines(data):
    queries = data / "queries.jsonl"
    append(queries, queries.read_text(encoding="utf-8").splitlines()[1])  # q2 again, line 10
    proc = evaluate(data)
    assert proc.returncode == 2
    assert error_line(proc) == (
        f"error: {queries}:10: duplicate query id 'q2' (first at {queries}:2)"
    )


def test_duplicate_judgment_names_both_lines(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("q1\td1\t1\nq2\td1\t1\nq1\td1\t2\n")
    with pytest.raises(DataError) as exc:
        read_qrels(path)
    assert str(exc.value) == (
        f"{path}:3: duplicate judgment for query 'q1', document 'd1' (first at {path}:1)"
    )


# -- 5. documents with empty text -----------------------------------------------------------------


def add_empty_documents(data: Path) -> Path:
    corpus = data / "corpus.jsonl"
    append(corpus, '{"_id": "dx", "title": "only a title", "text": ""}')
    append(corpus, '{"_id": "dy", "title": "blank", "text": "  \\n "}')
    return corpus


def test_empty_documents_are_skipped_and_counted_by_default(data):
    corpus = add_empty_documents(data)
    proc = evaluate(data)
    # before: "corpus.jsonl:9: record 'dx' has none of the text fields ['text']" (exit 2)
    assert proc.returncode == 0, proc.stderr
    assert (
        f"n_empty_documents=2: documents with empty text left out of the corpus "
        f"(e.g. 'dx' at {corpus}:9; dataset.on_empty=fail refuses them)"
    ) in proc.stdout + proc.stderr
    assert metrics(data)["n_documents"] == 8


def test_on_empty_fail_names_file_and_line(data):
    corpus = add_empty_documents(data)
    with pytest.raises(DataError) as exc:
        parse_corpus(JsonlRecordsParser(), [corpus], data, on_empty="fail")
    assert str(exc.value) == (
        f"{corpus}:9: document 'dx' has empty text "
        "(dataset.on_empty=skip leaves such documents out)"
    )
    parsed = read_corpus(JsonlRecordsParser(), [corpus], data)
    assert parsed.n_empty == 2 and len(parsed.documents) == 8
    assert parsed.warnings[0].startswith("n_empty_documents=2: ")


def test_on_empty_value_is_checked(data):
    proc = evaluate(data, "dataset.on_empty=drop")
    assert proc.returncode == 2
    assert error_line(proc) == "error: dataset.on_empty='drop': use one of skip, fail"
    with pytest.raises(ConfigError, match="dataset.on_empty='x'"):
        BeirDataset(str(data), on_empty="x")
    assert BeirDataset(str(data), on_empty="fail").load().on_empty == "fail"


def test_on_empty_fail_through_the_cli(data):
    corpus = add_empty_documents(data)
    proc = evaluate(data, "dataset.on_empty=fail")
    assert proc.returncode == 2
    assert error_line(proc).startswith(f"error: {corpus}:9: document 'dx' has empty text")


def test_record_without_any_text_field_is_still_an_error(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"_id": "a", "title": "t"}\n')
    with pytest.raises(DataError, match=r"c\.jsonl:1: record 'a' has none of the text fields"):
        parse_corpus(JsonlRecordsParser(), [path], tmp_path)


def test_on_empty_fail_is_not_passed_by_a_skip_run_in_the_cache(data):
    """A `skip` run caches the corpus without its empty documents; a `fail` run on the same
    cache must still refuse (its documents have a cache entry of their own)."""
    corpus = add_empty_documents(data)
    cache = f"cache.dir={data.parent / 'cache'}"
    assert evaluate(data, cache).returncode == 0
    proc = evaluate(data, cache, "dataset.on_empty=fail")
    assert proc.returncode == 2
    assert error_line(proc).startswith(f"error: {corpus}:9: document 'dx' has empty text")
    again = evaluate(data, cache)  # the skip entry still serves skip runs
    assert again.returncode == 0 and metrics(data)["cache/chunks/hits"] == 1
