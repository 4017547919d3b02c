"""Every shipped stage a server calls is safe under concurrent queries: 16 threads asking the
same pipeline the sample's queries (each three times, in a shuffled order) get exactly the
rankings, annotations and fallback levels one thread gets. The pipeline's runs take turns (its
stages keep a run's state); the embedders are safe on their own (tests/embedder)."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rag_lab.pipeline.build import build_dataset, build_pipeline
from tests.compose import compose_evaluate

STAGES = {
    "bm25": ["retrievers=[bm25]"],
    "dense": ["retrievers=[dense]"],
    "hybrid_rrf": ["retrievers=[dense,bm25]", "fusion=rrf"],
    "weighted": ["retrievers=[dense,bm25]", "fusion=weighted"],
    "routed": ["retrievers=[dense,bm25]", "fusion=routed"],
    "metadata_filter": ["postprocess=[metadata_filter]"],
    "rules": ["postprocess=[rules]"],
    "conflicts": ["postprocess=[conflicts]"],
    "credibility": ["postprocess=[credibility]"],
    "freshness": ["postprocess=[freshness]", "postprocess.freshness.as_of=2024-01-01"],
    "normalise": ["query_transforms=[normalise]"],
    "synonyms": ["query_transforms=[synonyms]"],
    "abbreviations": ["query_transforms=[abbreviations]"],
    "history": ["query_transforms=[history]"],
    "fallback": ["fallback=chain"],
}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_stage_under_16_threads_answers_as_under_one(stage, cache_dir, tmp_path):
    overrides = [*STAGES[stage], "embedder=hashing", "dataset.split=dev", "tracking=none"]
    cfg = compose_evaluate([*overrides, f"cache.dir={cache_dir}"], tmp_path)
    data = build_dataset(cfg).load()
    pipe = build_pipeline(cfg, data)
    pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    texts = {q: x.text for q, x in data.queries.items()}
    meta = {q: dict(x.metadata) for q, x in data.queries.items()}

    def one(qid: str):
        result = pipe.run({qid: texts[qid]}, 10, 0, {qid: meta[qid]})
        return (
            result.final.get(qid, {}),
            dict(result.annotations.get(qid, {})),
            result.fallback_level.get(qid),
        )

    alone = {q: one(q) for q in texts}
    order = [q for q in texts for _ in range(3)]
    random.Random(7).shuffle(order)
    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(one, order))
    for qid, got in zip(order, together, strict=True):
        assert got == alone[qid], (stage, qid)
