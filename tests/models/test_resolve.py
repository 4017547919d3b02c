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
