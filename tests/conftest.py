"""Shared fixtures: the BEIR-layout toy dataset under ``tests/data/toy``."""

from __future__ import annotations

from pathlib import Path

import pytest

TOY = Path(__file__).parent / "data" / "toy"


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
