"""rag_lab.models (model resolution, weight hashes) and its old path rag_lab.embedder.models."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import rag_lab.models as models
from rag_lab.errors import ConfigError


def test_old_path_is_the_same_module():
    assert importlib.import_module("rag_lab.embedder.models") is models
    from rag_lab.embedder import resolve_model
    from rag_lab.embedder.models import OFFLINE_MODELS, weights_hash

    assert resolve_model is models.resolve_model
    assert weights_hash is models.weights_hash and OFFLINE_MODELS is models.OFFLINE_MODELS


def test_old_path_first_in_a_fresh_interpreter():
    probe = (
        "import rag_lab.embedder.models as old, rag_lab.models as new; assert old is new; "
        "from rag_lab.embedder.models import resolve_model, _offline_help"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_missing_local_path_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="model path does not exist"):
        models.resolve_model(str(tmp_path / "nope" / "model"))


def test_weights_hash_follows_the_weight_bytes(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"abc")
    first = models.weights_hash(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"abd")
    assert models.weights_hash(str(tmp_path)) != first
    assert models.weights_hash("org/some-id") == "id:org/some-id"
