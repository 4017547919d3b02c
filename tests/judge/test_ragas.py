"""RagasJudge through a fake OpenAI-compatible server that answers ragas' prompts with canned,
deterministic JSON: the scores ragas computes from them, the rules that need no request, malformed
and late replies (retried, then missing and counted), the on-disk cache (counted at the server),
and the API key (sent, never kept in the judge's identity or repr)."""

from __future__ import annotations

import pytest

from rag_lab.cache import StageCache
from rag_lab.errors import ConfigError
from rag_lab.judge import Judge, JudgeRunner, RagasJudge
from rag_lab.text.refusals import REFUSALS
from tests.fake_openai import FakeOpenAI, route

CTX = [
    "Fault E102 means low oil pressure. Replace the seal every 3000 h.",
    "Keep the pressure below 8 MPa.",
]
KEY = "sk-test-DO-NOT-LEAK-ragas"


@pytest.fixture
def fake():
    with FakeOpenAI(route) as server:
        yield server


def judge(url: str, **kw) -> RagasJudge:
    """A judge of the fake server. Its 10 s timeout covers one call's requests on a loaded CI
    machine (1 s once timed out there: reference metrics make five requests); the late-reply test
    sets its own, shorter than the fake's 3 s delay."""
    return RagasJudge(url, "fake-judge", **{"retries": 1, "backoff": 0.0, "timeout": 10.0, **kw})


def test_faithfulness_from_the_llm_verdicts(fake):
    j = judge(fake.url, reference_metrics=False)
    assert isinstance(j, Judge)
    assert j.judge("E102?", CTX, "Fault E102 means low oil pressure.").faithfulness == 1.0
    res = j.judge("E102?", CTX, "Fault E102 means low oil pressure. The pump was made in 1990.")
    assert res.faithfulness == 0.5 and res.details == {"refusal": False}
    assert len(fake.requests) == 4  # statements + verdicts, twice
    assert all(r["model"] == "fake-judge" for r in fake.requests)


def test_context_precision_and_recall_with_a_reference(fake):
    res = judge(fake.url).judge(
        "E102?", CTX, "Fault E102 means low oil pressure.", reference="low oil pressure"
    )
    # precision: only the first context holds the reference (average precision 1.0); recall:
    # attributed
    assert res.faithfulness == 1.0
    assert res.details["context_precision"] == pytest.approx(1.0)
    assert res.details["context_recall"] == 1.0
    res = judge(fake.url).judge(
        "E102?", CTX[::-1], "Fault E102 means low oil pressure.", reference="low oil pressure"
    )
    assert res.details["context_precision"] == pytest.approx(0.5)


def test_rules_that_need_no_request(fake):
    j = judge(fake.url, reference_metrics=False)
    assert j.judge("q", CTX, REFUSALS["en"]).faithfulness == 1.0
    assert j.judge("q", CTX, "  ").faithfulness is None
    assert j.judge("q", [], "Fault E102 means low oil pressure.").faithfulness == 0.0
    assert fake.requests == []


def test_malformed_and_late_replies_become_counted_missing_scores(fake):
    r = JudgeRunner(judge(fake.url, reference_metrics=False, timeout=2.0), abort_after=None)
    malformed = r.judge("E102?", CTX, "MALFORMED answer.")
    assert malformed.faithfulness is None and malformed.details["attempts"] == 2
    assert "Parser" in malformed.details["error"] or "parse" in malformed.details["error"].lower()
    late = r.judge("E102?", CTX, "SLOW answer.")
    assert late.faithfulness is None and "Timeout" in late.details["error"]
    assert r.counts["failures"] == 2 and r.counts["retries"] == 2
    assert r.judge("E102?", CTX, "Fault E102 means low oil pressure.").faithfulness == 1.0


def test_second_run_reads_the_cache_and_retries_only_failures(fake, tmp_path):
    inputs = [
        ("E102?", CTX, "Fault E102 means low oil pressure.", "low oil pressure"),
        ("E102?", CTX, "MALFORMED answer.", None),
    ]
    first = JudgeRunner(judge(fake.url), StageCache(tmp_path), abort_after=None)
    scores = [first.judge(*x).faithfulness for x in inputs]
    assert scores == [1.0, None]
    n_first = len(fake.requests)
    second = JudgeRunner(judge(fake.url), StageCache(tmp_path), abort_after=None)
    assert [second.judge(*x).faithfulness for x in inputs] == scores
    assert second.counts["cache_hits"] == 1 and second.counts["failures"] == 1
    # the cached verdict made no request; the failed one was asked again (same number of requests)
    ok_requests = 2 + len(CTX) + 1  # statements, verdicts, precision per context, recall
    assert len(fake.requests) - n_first == n_first - ok_requests


def test_key_is_sent_but_not_kept(fake, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", KEY)
    j = judge(fake.url, api_key_env="JUDGE_KEY", reference_metrics=False)
    j.judge("E102?", CTX, "Fault E102 means low oil pressure.")
    assert fake.headers[0]["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(j) and KEY not in str(j.identity)
    assert j.identity["model"] == "fake-judge" and j.identity["ragas"]


def test_errors_never_carry_the_key(monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", KEY)
    with FakeOpenAI(lambda body: (401, {"error": {"message": f"bad key {KEY}"}})) as fake:
        r = JudgeRunner(
            judge(fake.url, api_key_env="JUDGE_KEY", retries=0, reference_metrics=False),
            abort_after=None,
        )
        res = r.judge("E102?", CTX, "Fault E102 means low oil pressure.")
    assert res.faithfulness is None
    assert "***" in res.details["error"] and KEY not in res.details["error"]


def test_bad_settings():
    with pytest.raises(ConfigError):
        RagasJudge("127.0.0.1:8000", "m")
    with pytest.raises(ConfigError) as err:
        RagasJudge("http://127.0.0.1:1/v1", "m", api_key_env=KEY)
    assert KEY not in str(err.value)
