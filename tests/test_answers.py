"""The answer stage inside ``evaluate``: generator + judge on the toy dataset."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from rag_lab.evaluate import evaluate
from tests.compose import TOY_OVERRIDES, compose_evaluate


def test_extractive_answers_are_judged_and_scored(tmp_path):
    cfg = compose_evaluate([*TOY_OVERRIDES, "retrievers=[bm25]", "tracking=none", "generator=extractive",
                            "judge=lexical"], tmp_path)
    m = evaluate(cfg)
    for key in ("answer/faithfulness", "answer/contained", "answer/f1", "answer/exact_match",
                "answer/refusal_rate_unanswerable", "answer/wrong_refusal_rate", "answer/context_utilisation"):
        assert key in m
    # sentences copied from the context are, by construction, supported by it
    assert m["answer/faithfulness"] == 1.0 and m["answer/n_missing_faithfulness"] == 0
    assert 0 < m["answer/contained"] <= 1
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet")
    assert {"answer_response", "answer_faithfulness", "answer_refusal"} <= set(table.columns)
    q6 = table[table.query_id == "q6"].iloc[0]  # "compressor filter interval"
    assert "2000 hours" in q6.answer_response and q6.answer_contained == 1.0
    assert m["answer/contained"] == table.answer_contained.dropna().mean()
    # the unanswerable query's answer: whatever it says, it is counted in the refusal rate
    assert m["answer/refusal_rate_unanswerable"] in (0.0, 1.0)


def test_without_a_judge_faithfulness_is_missing_not_zero(tmp_path):
    cfg = compose_evaluate([*TOY_OVERRIDES, "retrievers=[bm25]", "tracking=none", "generator=extractive"], tmp_path)
    m = evaluate(cfg)
    assert math.isnan(m["answer/faithfulness"]) and m["answer/n_missing_faithfulness"] == m["n_queries"]


def test_retrieval_only_run_has_no_answer_metrics(tmp_path):
    m = evaluate(compose_evaluate([*TOY_OVERRIDES, "retrievers=[bm25]", "tracking=none"], tmp_path))
    assert not any(k.startswith("answer/") for k in m)
