"""Fixtures shared by the model tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A private model cache for the test module, so its tests see exports being made (the
    first load builds one)."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("rag_lab_home")
        mp.setenv("RAG_LAB_HOME", str(path))
        yield path
