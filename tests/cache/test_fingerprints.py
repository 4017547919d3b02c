"""Input fingerprints read back by stat: the same values as hashing the bytes, never stale."""

from __future__ import annotations

import os
import shutil

import pytest

from rag_lab.cache import fingerprints, open_cache
from rag_lab.cache import store as store_mod
from rag_lab.dataset import BeirDataset
from rag_lab.io.files import fingerprint_files
from tests.compose import TOY


@pytest.fixture
def records(monkeypatch):
    """Fresh, process-only records; the list counts the times the files were hashed. Tests
    that need settled files set SETTLE_S to 0 (a file a test writes is younger than 2 s, and
    setting an old mtime does not help: utime sets ctime to now)."""
    monkeypatch.setattr(fingerprints, "RECORDS", fingerprints._Records())
    reads = []

    def counting(paths, digest_size=16, root=None):
        reads.append([p.name for p in paths])
        return fingerprint_files(paths, digest_size=digest_size, root=root)

    monkeypatch.setattr(fingerprints, "fingerprint_files", counting)
    return reads


@pytest.fixture
def toy(tmp_path):
    folder = tmp_path / "toy"
    shutil.copytree(TOY, folder)
    return folder


def test_values_are_those_of_hashing_the_bytes(records, toy, monkeypatch):
    monkeypatch.setattr(fingerprints, "SETTLE_S", 0.0)
    files = [toy / "corpus.jsonl", toy / "queries.jsonl"]
    for root in (None, toy):
        want = fingerprint_files(files, root=root)
        assert fingerprints.fingerprint(files, root=root) == want
        assert fingerprints.fingerprint(files, root=root) == want  # read back
    assert fingerprints.fingerprint(files, digest_size=8) == fingerprint_files(files, 8)
    # three distinct keys (with and without root, another digest size), each hashed once
    assert len(records) == 3


def test_an_unchanged_settled_file_is_not_read_again(records, toy, monkeypatch):
    monkeypatch.setattr(fingerprints, "SETTLE_S", 0.0)
    files = [toy / "corpus.jsonl"]
    first = fingerprints.fingerprint(files, root=toy)
    assert fingerprints.fingerprint(files, root=toy) == first
    assert len(records) == 1


def test_an_edit_that_keeps_size_and_mtime_is_seen(records, toy, monkeypatch):
    monkeypatch.setattr(fingerprints, "SETTLE_S", 0.0)
    corpus = toy / "corpus.jsonl"
    before = fingerprints.fingerprint([corpus], root=toy)
    st = corpus.stat()
    data = corpus.read_bytes()
    i = data.index(b'"text": "') + 9
    flipped = data[:i] + (b"X" if data[i : i + 1] != b"X" else b"Y") + data[i + 1 :]
    corpus.write_bytes(flipped)  # same size ...
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... and the old mtime
    assert corpus.stat().st_size == st.st_size and corpus.stat().st_mtime_ns == st.st_mtime_ns
    after = fingerprints.fingerprint([corpus], root=toy)
    assert after != before and after == fingerprint_files([corpus], root=toy)


def test_a_file_written_just_now_is_hashed_every_time(records, toy):
    files = [toy / "corpus.jsonl"]  # just copied: younger than SETTLE_S (2 s)
    a = fingerprints.fingerprint(files)
    b = fingerprints.fingerprint(files)
    assert a == b and len(records) == 2


def test_records_survive_the_process_in_the_cache_folder(records, toy, tmp_path, monkeypatch):
    monkeypatch.setattr(fingerprints, "SETTLE_S", 0.0)
    monkeypatch.setattr(store_mod, "_OPEN", {})
    cache_dir = tmp_path / "cache"
    open_cache(cache_dir)  # attaches <cache>/fingerprints.sqlite
    files = [toy / "corpus.jsonl"]
    value = fingerprints.fingerprint(files, root=toy)
    assert (cache_dir / fingerprints.FILE_NAME).is_file()
    fingerprints.RECORDS.memory.clear()  # a new process: only the file remembers
    assert fingerprints.fingerprint(files, root=toy) == value
    assert len(records) == 1
    store_mod.clear(cache_dir)  # clearing everything drops the records too
    assert not (cache_dir / fingerprints.FILE_NAME).exists()
    fingerprints.attach(None)


def test_an_edited_document_reaches_the_dataset_and_its_chunks(records, toy, monkeypatch):
    """The loader's corpus fingerprint (what keys parse, chunk and embed) follows an edit made
    after a run recorded it, even one that keeps the file's size and mtime."""
    monkeypatch.setattr(fingerprints, "SETTLE_S", 0.0)
    first = BeirDataset(str(toy)).load()
    again = BeirDataset(str(toy)).load()
    assert again.corpus_fingerprint == first.corpus_fingerprint
    assert len(records) == 2  # (corpus + labels) and corpus: each hashed once
    corpus = toy / "corpus.jsonl"
    st = corpus.stat()
    corpus.write_text(corpus.read_text(encoding="utf-8").replace("e", "E", 1), encoding="utf-8")
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns))
    edited = BeirDataset(str(toy)).load()
    assert edited.corpus_fingerprint != first.corpus_fingerprint
    assert edited.fingerprint != first.fingerprint
    assert edited.corpus_fingerprint == fingerprint_files([corpus], root=toy)
