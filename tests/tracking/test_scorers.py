"""rag_lab's metrics and judges as ``mlflow.genai`` scorers (issue 31 item 4): a user's own app
(a traced retriever function and an answer) evaluated on the sample by ``mlflow.genai.evaluate``
scores what rag_lab's own scoring of the same retrieval gives, query by query."""

from __future__ import annotations

import math

import mlflow
import pytest
from mlflow.entities import Document, SpanType, Trace

from rag_lab.evaluate import load
from rag_lab.judge.lexical import LexicalJudge
from rag_lab.metrics.score import score_split
from rag_lab.mlflow import faithfulness, hit_rate, ndcg, noise_ratio, recall
from rag_lab.pipeline.answers import score_response
from rag_lab.ranking import ranked
from rag_lab.tracking.scorers import expected_grades, retrieved_ids
from tests.compose import compose_evaluate

N = 12  # queries the app answers (each is a traced call: keep it short)


@pytest.fixture
def restore_tracking_uri():
    before = mlflow.get_tracking_uri()
    yield
    mlflow.set_tracking_uri(before)


def test_ids_and_expectations_read_as_documented():
    docs = [
        {"id": "a#0", "metadata": {"doc_uri": "a"}},
        {"id": "b#1", "metadata": {}},
        {"id": "a#2", "metadata": {"doc_uri": "a"}},
    ]
    assert retrieved_ids({"documents": ["x", "y", "x"]}, None) == ["x", "y"]
    assert retrieved_ids(None, None) == []
    # MLflow Document dicts: the doc_uri, else the id; a document's chunks once
    assert retrieved_ids({"documents": docs}, None) == ["a", "b#1"]
    assert expected_grades({"expected_document_ids": ["a", "b"]}) == {"a": 1, "b": 1}
    assert expected_grades({"expected_document_ids": {"a": 2}}) == {"a": 2}
    assert expected_grades({"expected_retrieved_context": [{"doc_uri": "a"}]}) == {"a": 1}
    assert expected_grades(None) == {}
    with pytest.raises(ValueError, match="k must be"):
        hit_rate(0)


def test_mlflow_genai_evaluate_with_rag_lab_scorers(tmp_path, restore_tracking_uri):
    cfg = compose_evaluate(
        # no stage cache: MLflow calls the app from its worker threads, and the cache's sqlite
        # connection belongs to the thread that opened it
        [
            "dataset=sample",
            "embedder=hashing",
            "retrievers=[bm25]",
            "tracking=none",
            "cache.dir=null",
        ],
        tmp_path,
    )
    data, pipe, _ = load(cfg)
    chunks = pipe.all_chunks
    # rag_lab's own scoring of the pipeline's run (vectorised run_metrics, document level)
    result = pipe.run({q: x.text for q, x in data.queries.items()})
    _, table = score_split(result.final, chunks, data, cfg.evaluation)
    table = table.set_index("query_id")
    picked = [q for q in data.queries if data.queries[q].category != "unanswerable"][:N]
    picked.append(next(q for q in data.queries if data.queries[q].category == "unanswerable"))

    # the user's app, as an MLflow user writes one: a traced retriever returning Documents
    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def search(question: str) -> list[dict]:
        run = pipe.run({"q": question}).final["q"]
        return [
            Document(page_content=chunks[c].text, metadata={"doc_uri": chunks[c].doc_id}).to_dict()
            for c in ranked(run)
        ]

    @mlflow.trace
    def predict_fn(question: str) -> dict:
        docs = search(question)
        return {"answer": docs[0]["page_content"].split("\n")[0] if docs else "I don't know."}

    rows = [
        {
            "inputs": {"question": data.queries[q].text},
            "expectations": {"expected_document_ids": dict(data.qrels[q])},
        }
        for q in picked
    ]
    judge = LexicalJudge(paraphrase_model=None)
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    mlflow.set_experiment("my_app")
    scorers = [hit_rate(5), recall(10), ndcg(10), noise_ratio(5), faithfulness(judge)]
    res = mlflow.genai.evaluate(data=rows, predict_fn=predict_fn, scorers=scorers)
    df = res.result_df
    assert df is not None and len(df) == len(picked)
    by_text = {data.queries[q].text: q for q in picked}
    seen = set()
    for _, row in df.iterrows():
        qid = by_text[row["request"]["question"]]
        seen.add(qid)
        ours = table.loc[qid]
        for name in ("hit_rate_at_5", "recall_at_10", "ndcg_at_10", "noise_ratio_at_5"):
            got, want = row[f"{name}/value"], ours[name]
            if isinstance(want, float) and math.isnan(want):  # unanswerable: no score
                assert got is None or (isinstance(got, float) and math.isnan(got)), (qid, name)
            else:
                assert got == pytest.approx(want), (qid, name)
        # the judge's faithfulness, as rag_lab scores the same answer on the same texts
        trace = row["trace"]
        trace = Trace.from_json(trace) if isinstance(trace, str) else trace
        texts = [
            d["page_content"] for d in trace.search_spans(span_type=SpanType.RETRIEVER)[0].outputs
        ]
        answer = row["response"]["answer"]
        want = score_response(judge, data.queries[qid].text, texts, answer, None)["faithfulness"]
        assert row["faithfulness/value"] == pytest.approx(want)
    assert seen == set(picked)
    assert res.metrics["hit_rate_at_5/mean"] == pytest.approx(
        table.loc[picked[:-1], "hit_rate_at_5"].mean()
    )
