"""The answer stage inside ``evaluate``: generator + judge on the toy dataset."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from rag_lab.evaluate import evaluate
from rag_lab.tracking.evaluation import mlflow_metric_names
from tests.compose import TOY_OVERRIDES, compose_evaluate


def test_extractive_answers_are_judged_and_scored(tmp_path):
    cfg = compose_evaluate(
        [
            *TOY_OVERRIDES,
            "retrievers=[bm25]",
            "tracking=none",
            "generator=extractive",
            "judge=lexical",
        ],
        tmp_path,
    )
    m = evaluate(cfg)
    for key in (
        "answer/faithfulness",
        "answer/contained",
        "answer/f1",
        "answer/exact_match",
        "answer/refusal_rate_unanswerable",
        "answer/wrong_refusal_rate",
        "answer/context_utilisation",
    ):
        assert key in m
    # sentences copied from the context are, by construction, supported by it
    assert m["answer/faithfulness"] == 1.0 and m["answer/n_missing_faithfulness"] == 0
    assert m["answer/unsupported_fact_rate"] == 0.0 and m["answer/faithful_rate"] == 1.0
    assert 0 < m["answer/contained"] <= 1
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet")
    assert {"answer_response", "answer_faithfulness", "answer_refusal"} <= set(table.columns)
    q6 = table[table.query_id == "q6"].iloc[0]  # "compressor filter interval"
    assert "2000 hours" in q6.answer_response and q6.answer_contained == 1.0
    assert m["answer/contained"] == table.answer_contained.dropna().mean()
    # the unanswerable query's answer: whatever it says, it is counted in the refusal rate
    assert m["answer/refusal_rate_unanswerable"] in (0.0, 1.0)


def test_without_a_judge_faithfulness_is_missing_not_zero(tmp_path):
    cfg = compose_evaluate(
        [*TOY_OVERRIDES, "retrievers=[bm25]", "tracking=none", "generator=extractive"], tmp_path
    )
    m = evaluate(cfg)
    assert math.isnan(m["answer/faithfulness"])
    assert m["answer/n_missing_faithfulness"] == m["n_queries"]


def test_retrieval_only_run_has_no_answer_metrics(tmp_path):
    m = evaluate(compose_evaluate([*TOY_OVERRIDES, "retrievers=[bm25]", "tracking=none"], tmp_path))
    assert not any(k.startswith("answer/") for k in m)


KEY = "sk-test-DO-NOT-LEAK-evaluate"


def _first_sentence_answer(body):
    """Generator prompt → the first sentence of context block [1] (faithful); the query about the
    compressor gets an answer the fake judge replies to with unparseable text (a judge failure)."""
    from tests.fake_openai import route

    user = str(body["messages"][-1]["content"])
    if "compressor" in user.rsplit("Question:", 1)[-1]:
        return route(body, "MALFORMED compressor answer.")
    block = user.split("\n", 2)[2] if user.startswith("Context:\n[1]") else "Nothing."
    return route(body, block.split(". ")[0].split("\n")[0].rstrip(".") + ".")


def test_openai_generator_and_ragas_judge_through_a_fake_endpoint(tmp_path, monkeypatch):
    """The whole answer stage over HTTP: answers generated and judged, one judge failure retried
    then counted as missing, the rerun served from the cache (counted at the server), and the API
    key in none of the outputs or MLflow params."""
    import mlflow

    from tests.fake_openai import FakeOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(_first_sentence_answer) as fake:
        common = [
            *TOY_OVERRIDES,
            "retrievers=[bm25]",
            "generator=openai",
            f"generator.base_url={fake.url}",
            "generator.model=fake-gen",
            "generator.backoff=0",
            "judge=ragas",
            f"judge.base_url={fake.url}",
            "judge.model=fake-judge",
            "judge.retries=1",
            "judge.backoff=0",
            "judge.timeout=5",
            "evaluation.answer_k=2",
        ]
        cfg = compose_evaluate(common, tmp_path)
        m = evaluate(cfg)
        n_first = len(fake.requests)
        gen_requests = [r for r in fake.requests if r["model"] == "fake-gen"]
        assert len(gen_requests) == m["n_queries"] == m["answer/generator_calls"]
        assert all(h["authorization"] == f"Bearer {KEY}" for h in fake.headers)
        assert m["answer/n_judge_failures"] == 1 and m["answer/judge_retries"] == 1
        assert m["answer/n_missing_faithfulness"] == 1
        assert 0.0 <= m["answer/faithfulness"] <= 1.0 and not math.isnan(m["answer/context_recall"])
        table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet")
        failed = table[table.answer_judge_error.notna()]
        assert list(failed.query_id) == ["q6"] and failed.answer_faithfulness.isna().all()

        # rerun (a new run folder, the same cache): no generator request, only the failed
        # verdict again
        cfg2 = compose_evaluate([*common, "tracking=none"], tmp_path / "again")
        cfg2.cache.dir = cfg.cache.dir
        m2 = evaluate(cfg2)
        again = fake.requests[n_first:]
        assert m2["answer/generator_cache_hits"] == m["n_queries"]
        assert m2["answer/generator_calls"] == 0
        assert m2["answer/judge_cache_hits"] == m["n_queries"] - 1
        assert again and all(
            r["model"] == "fake-judge" and "MALFORMED" in str(r["messages"]) for r in again
        )
        assert m2["answer/faithfulness"] == m["answer/faithfulness"]

    # the key is in no file the runs wrote (MLflow store included) and in no logged param
    for root in (tmp_path,):
        for f in root.rglob("*"):
            if f.is_file():
                assert KEY.encode() not in f.read_bytes(), f
    client = mlflow.tracking.MlflowClient(cfg.tracking.uri)
    run = client.get_run((Path(cfg.paths.output_dir) / "mlflow_run_id").read_text())
    assert run.data.params["generator.api_key_env"] == "OPENAI_API_KEY"
    assert run.data.params["judge.api_key_env"] == "OPENAI_API_KEY"
    assert not any(KEY in v for v in [*run.data.params.values(), *run.data.tags.values()])
    name = mlflow_metric_names(["answer/n_judge_failures"])["answer/n_judge_failures"]
    assert run.data.metrics[name] == 1
