"""A whole LangChain runnable / LlamaIndex query engine evaluated end to end on the sample
(retrievers=[foreign_pipeline] generator=foreign_pipeline): its sources are the run, its answers
are scored as a native pipeline's, and every source that maps to no chunk is counted."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rag_lab.analysis.gate import gate
from tests.adapters.foreign import STRAY

E2E = ["retrievers=[foreign_pipeline]", "generator=foreign_pipeline", "judge=lexical"]
OPT_IN = "retrievers.foreign_pipeline.allow_imports=[tests.adapters]"


def _answers(run_dir):
    return {
        r["id"]: r["response"]
        for r in map(json.loads, (run_dir / "answers.jsonl").read_text().splitlines())
    }


def test_the_tutorial_chain_scores_as_the_same_pipeline_built_from_rag_lab_stages(run_sample):
    m, run_dir = run_sample(E2E)
    native, native_dir = run_sample(
        ["retrievers=[dense]", "generator=extractive", "judge=lexical", "evaluation.answer_k=3"]
    )
    n = 107  # the sample's test queries
    # its top-3 sources are the dense retriever's top 3 over the same embedder and chunks
    ours, theirs = _table(run_dir), _table(native_dir)
    assert [list(x) for x in ours["retrieved_chunk_ids"]] == [
        list(x)[:3] for x in theirs["retrieved_chunk_ids"]
    ]
    assert m["hit_rate_at_1"] == native["hit_rate_at_1"]
    assert m["foreign_pipeline/sources"] == 3 * n
    assert m["foreign_pipeline/mapped_by_metadata"] == 3 * n
    assert m["foreign_pipeline/unmapped_sources"] == 0 and m["unmapped_sources/n_flagged"] == 0
    # the chain's "LLM" is the extractive baseline over those sources: the same answers, scored
    # by the same judge and answer metrics
    assert _answers(run_dir) == _answers(native_dir)
    for metric in ("answer/faithfulness", "answer/f1", "answer/contained"):
        assert m[metric] == pytest.approx(native[metric])
    assert m["answer/generator_calls"] == n
    # the gate compares it with the native run like any two runs
    verdict = gate(native_dir, run_dir, {"hit_rate_at_1": 0.0, "answer/faithfulness": 0.0}, {})
    assert verdict.exit_code == 0 and len(verdict.checked) == 2


def test_a_rerun_reads_every_invocation_back(run_sample, tmp_path):
    m, run_dir = run_sample([*E2E, "retrievers.foreign_pipeline.kwargs.k=4"])
    if "foreign_pipeline/build_seconds" in m:  # computed here (not by an earlier test)
        # only the queries whose text an earlier query of the split had were read back
        assert m["foreign_pipeline/adapter_cache_hits"] == _duplicate_texts(run_dir)
    again, _ = run_sample([*E2E, "retrievers.foreign_pipeline.kwargs.k=4"])
    assert "foreign_pipeline/build_seconds" not in again  # nothing built, nothing invoked
    assert again["foreign_pipeline/adapter_cache_hits"] == 107
    assert again["foreign_pipeline/sources"] == 4 * 107
    for metric in ("ndcg_at_10", "hit_rate_at_5", "answer/faithfulness", "answer/f1"):
        assert again[metric] == m[metric]


def _table(run_dir) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "per_query.parquet")


def _duplicate_texts(run_dir) -> int:
    """Queries of the split whose text an earlier query already had (a hit in the first run)."""
    table = _table(run_dir)
    return int(len(table) - table["text"].nunique())


def test_unmapped_sources_are_counted_per_run_and_per_query(run_sample):
    m, run_dir = run_sample(
        [
            *E2E,
            "retrievers.foreign_pipeline.factory=tests.adapters.foreign.chain_with_stray_sources",
            "~retrievers.foreign_pipeline.kwargs.tokenizer",
            OPT_IN,
        ]
    )
    n = 107
    assert m["foreign_pipeline/sources"] == 5 * n
    assert m["foreign_pipeline/mapped_by_metadata"] == 3 * n
    # the upper-cased copy of a source maps by text (to its chunk again, or an identical one)
    assert m["foreign_pipeline/mapped_by_contained"] + m["foreign_pipeline/duplicate_sources"] == n
    assert m["foreign_pipeline/unmapped_sources"] == n
    assert m["unmapped_sources/n_flagged"] == n
    table = _table(run_dir)
    assert all(json.loads(v) == [STRAY] for v in table["unmapped_sources"])


def test_a_runnable_that_cites_nothing_is_scored_as_retrieving_nothing(run_sample):
    m, run_dir = run_sample(
        [
            *E2E,
            "retrievers.foreign_pipeline.factory=tests.adapters.foreign.answer_only",
            "~retrievers.foreign_pipeline.kwargs",
            "retrievers.foreign_pipeline.embedder_argument=null",
            OPT_IN,
        ]
    )
    assert m["foreign_pipeline/queries_without_sources"] == 107
    assert m["hit_rate_at_10"] == 0.0
    assert all(a.startswith("no idea about") for a in _answers(run_dir).values())
    _, tutorial_dir = run_sample(E2E)
    assert gate(tutorial_dir, run_dir, {"hit_rate_at_5": 0.05}, {}).exit_code == 1


def test_a_llamaindex_query_engine_end_to_end_answers_as_the_langchain_chain(run_sample):
    lc, lc_dir = run_sample(E2E)
    li, li_dir = run_sample(
        [
            *E2E,
            "retrievers.foreign_pipeline.framework=llamaindex",
            "retrievers.foreign_pipeline.factory=rag_lab.adapters.examples.tutorial_query_engine",
            "retrievers.foreign_pipeline.corpus_argument=nodes",
            "retrievers.foreign_pipeline.embedder_argument=embed_model",
        ]
    )
    assert li["foreign_pipeline/mapped_by_metadata"] == 3 * 107
    assert li["hit_rate_at_1"] == lc["hit_rate_at_1"]
    assert _answers(li_dir) == _answers(lc_dir)
