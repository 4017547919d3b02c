"""Shared fixtures: the BEIR-layout toy dataset under ``tests/data/toy``."""

from __future__ import annotations

from pathlib import Path

import pytest

TOY = Path(__file__).parent / "data" / "toy"

# pyproject's `timeout` (300 s) is the limit for the default run; a model-heavy `slow` test (a real
# training run, a GGUF server, a benchmark-sized set) gets this much unless it sets its own.
SLOW_TIMEOUT_S = 1800


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


@pytest.fixture(scope="session")
def toy_path() -> Path:
    return TOY


@pytest.fixture(scope="session")
def toy_docs():
    """The toy corpus parsed with the strict BEIR record parser."""
    from rag_lab.parser import BeirCorpusParser, parse_corpus

    return parse_corpus(BeirCorpusParser(), [TOY / "corpus.jsonl"], TOY)


@pytest.fixture(scope="session")
def toy_chunks(toy_docs):
    """One chunk per toy document (the BEIR setting)."""
    from rag_lab.chunker import NoneChunker

    return NoneChunker().chunk(toy_docs)


@pytest.fixture(scope="session")
def toy_queries():
    from rag_lab.dataset import read_queries

    return read_queries(TOY / "queries.jsonl")
