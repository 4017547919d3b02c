"""The answer stage inside ``evaluate``: generator + judge on the toy dataset."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from rag_lab.evaluate import evaluate
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
    assert run.data.metrics["answer/n_judge_failures"] == 1


def test_context_stages_shrink_the_context_and_are_reported(tmp_path):
    """context=[order,dedupe,distill] on the toy set: fewer context tokens than without stages,
    per query in per_query.parquet, and the answer-side miss reasons counted."""
    base = [
        *TOY_OVERRIDES,
        "retrievers=[bm25]",
        "tracking=none",
        "generator=extractive",
        "judge=lexical",
    ]
    off = evaluate(compose_evaluate(base, tmp_path / "off"))
    cfg = compose_evaluate([*base, "context=[order,dedupe,distill]"], tmp_path / "on")
    on = evaluate(cfg)
    assert (
        off["context/tokens_before"] == off["context/tokens_after"] == on["context/tokens_before"]
    )
    assert 0 < on["context/tokens_after"] < on["context/tokens_before"]
    assert on["context/tokens_saved_share"] > 0
    # each stage's cost per query (wall time of its apply calls)
    assert all(on[f"context/{n}/ms_per_query"] >= 0 for n in ("order", "dedupe", "distill"))
    assert not any(k.endswith("/ms_per_query") and k.startswith("context/") for k in off)
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet")
    assert (table.answer_context_tokens_after <= table.answer_context_tokens_before).all()
    assert table.answer_context_tokens_before.mean() == on["context/tokens_before"]
    counted = sum(v for k, v in on.items() if k.startswith("answer_misses/"))
    reasons = table.answer_miss_reason
    assert counted == reasons.isin(["answer_hit", ""]).__invert__().sum()
    assert set(reasons) <= {
        "",
        "answer_hit",
        "evidence_not_in_context",
        "evidence_dropped_by_context",
        "refused_despite_context",
        "context_not_used",
        "wrong_despite_context",
    }


def test_notes_reach_the_generator_prompt_and_the_llm_distiller_runs(tmp_path, monkeypatch):
    """answer_queries(notes=...) puts a query's notes before its context; context=[llm_distill]
    sends one distillation request per query through the fake endpoint, then the answer prompt
    reads the cited facts; a rerun makes no request."""
    from rag_lab.pipeline import build
    from rag_lab.pipeline.answers import answer_queries
    from rag_lab.ranking import ranked
    from tests.fake_openai import FakeOpenAI, last_user_text

    def distilling(body):
        return str(body["messages"][0]["content"]).startswith(("You extract", "你负责从"))

    def reply(body):
        if distilling(body):  # the distiller's prompt: cite passage 1
            return "Fault E102 on the HX-200 means oil temperature above 70 °C [1]"
        return "It means the oil is too hot [1]."

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAI(reply) as fake:
        cfg = compose_evaluate(
            [
                *TOY_OVERRIDES,
                "retrievers=[bm25]",
                "tracking=none",
                "generator=openai",
                f"generator.base_url={fake.url}",
                "generator.model=fake-gen",
                "context=[llm_distill]",
                "evaluation.answer_k=2",
            ],
            tmp_path,
        )
        data = build.build_dataset(cfg).load()
        pipe = build.build_pipeline(cfg)
        pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
        result = pipe.run({q: x.text for q, x in data.queries.items()}, 10, 0)
        stages = build.build_context_stages(cfg)
        note = "sources disagree on the E102 limit"
        args = (data, pipe.chunks, result.final, build.build_generator(cfg), None, 2)
        m, rows = answer_queries(*args, cache=pipe.cache, stages=stages, notes={"q1": [note]})
        n = len(data.queries)
        answered = [r for r in fake.requests if not distilling(r)]
        distilled = [r for r in fake.requests if distilling(r)]
        assert len(distilled) == m["context/llm_distill/llm_calls"] == n
        noted = [r for r in answered if note in last_user_text(r)]
        assert len(noted) == 1 and "E102" in last_user_text(noted[0])
        # the answer prompt reads the fact, not the whole chunk
        q1 = next(r for r in noted)
        assert "above 70 °C" in last_user_text(q1) and "Context:\n" in last_user_text(q1)
        assert m["context/tokens_after"] < m["context/tokens_before"]
        # the judge's contexts are the source chunks, not the distilled fact
        top = ranked(result.final["q1"])[0]
        assert rows["q1"]["contexts"] == [pipe.chunks[top].text]
        before = len(fake.requests)
        m2, _ = answer_queries(
            *args, cache=pipe.cache, stages=build.build_context_stages(cfg), notes={"q1": [note]}
        )
        assert len(fake.requests) == before  # distillations and answers from the cache
        assert m2["context/llm_distill/llm_cache_hits"] == n


def test_lexical_verdicts_come_back_from_the_cache_unchanged(tmp_path):
    """The lexical judge is cached like the model judges (its identity: settings, term analysis,
    paraphrase model, package versions, the rules' source hash): a rerun judges nothing again and
    every answer number and per-query verdict column equals a run without a cache."""
    common = [
        *TOY_OVERRIDES,
        "retrievers=[bm25]",
        "tracking=none",
        "generator=extractive",
        "judge=lexical",
        "context=[distill]",
    ]
    runs = {}
    for name, cache in (("none", "cache.dir=null"), ("cold", None), ("warm", None)):
        cfg = compose_evaluate([*common, *([cache] if cache else [])], tmp_path / name)
        if name != "none":
            cfg.cache.dir = str(tmp_path / "cache")
        m = evaluate(cfg)
        table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet")
        runs[name] = (m, table)
    counts = ("answer/judge_calls", "answer/judge_cache_hits")
    (m0, t0), (m1, t1), (m2, t2) = runs["none"], runs["cold"], runs["warm"]
    assert m1["answer/judge_calls"] == m0["answer/judge_calls"] > 0
    assert m2["answer/judge_calls"] == 0
    assert m2["answer/judge_cache_hits"] == m1["answer/judge_calls"]
    for m in (m1, m2):
        assert {k: v for k, v in m.items() if k.startswith("answer/") and k not in counts} == {
            k: v for k, v in m0.items() if k.startswith("answer/") and k not in counts
        }
    cols = [c for c in t0.columns if c.startswith("answer_")]
    assert cols
    for t in (t1, t2):
        pd.testing.assert_frame_equal(t[cols], t0[cols])
