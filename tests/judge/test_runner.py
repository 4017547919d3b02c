"""JudgeRunner: retries with backoff, failures recorded as missing (never zero) and counted,
misconfigured judges stop the run, verdicts cached on disk by judge identity + inputs."""

from __future__ import annotations

import math

import pytest

from rag_lab.cache import StageCache
from rag_lab.errors import ConfigError
from rag_lab.judge import Judge, JudgeResult, JudgeRunner, LexicalJudge
from rag_lab.judge.runner import JudgeFailedError


class Scripted:
    """A judge that plays back a script of results / exceptions, one per call."""

    def __init__(self, script, identity=None, retries=2, backoff=0.5):
        self.script, self.calls = list(script), 0
        self.retries, self.backoff = retries, backoff
        if identity is not None:
            self.identity = identity

    def judge(self, query, contexts, response, reference=None):
        self.calls += 1
        step = self.script.pop(0) if self.script else JudgeResult(1.0)
        if isinstance(step, Exception):
            raise step
        return step


def runner(judge, **kw):
    sleeps = []
    return JudgeRunner(judge, sleep=sleeps.append, **kw), sleeps


def test_is_a_judge():
    assert isinstance(JudgeRunner(LexicalJudge()), Judge)


def test_failures_are_retried_with_backoff():
    j = Scripted([TimeoutError("slow"), ValueError("not json"), JudgeResult(0.5, {"n": 2})])
    r, sleeps = runner(j)
    assert r.judge("q", ["c"], "a") == JudgeResult(0.5, {"n": 2})
    assert sleeps == [0.5, 1.0] and j.calls == 3
    assert r.counts == {"calls": 3, "retries": 2}


def test_spent_retries_give_a_missing_score_with_the_error():
    j = Scripted([RuntimeError("boom")] * 3)
    r, _ = runner(j, abort_after=None)
    res = r.judge("q", ["c"], "a")
    assert res.faithfulness is None and res.faithfulness != 0.0
    assert res.details == {"error": "RuntimeError: boom", "attempts": 3}
    assert r.counts["failures"] == 1 and r.counts["calls"] == 3


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, "0.7"])
def test_scores_outside_the_unit_interval_are_failures(bad):
    r, _ = runner(Scripted([JudgeResult(bad)] * 3), abort_after=None)
    res = r.judge("q", ["c"], "a")
    assert res.faithfulness is None and "outside [0, 1]" in res.details["error"]


def test_config_errors_are_not_retried():
    j = Scripted([ConfigError("no such model")])
    with pytest.raises(ConfigError):
        runner(j)[0].judge("q", ["c"], "a")
    assert j.calls == 1


def test_a_judge_that_never_worked_stops_the_run():
    r, _ = runner(Scripted([OSError("connection refused")] * 10, retries=0), abort_after=3)
    assert r.judge("q", [], "a").faithfulness is None
    assert r.judge("q", [], "a").faithfulness is None
    with pytest.raises(
        JudgeFailedError, match="failed on 3 inputs.*has not worked once.*connection refused"
    ):
        r.judge("q", [], "a")


def test_after_one_success_failures_never_stop_the_run():
    r, _ = runner(Scripted([JudgeResult(1.0)] + [OSError("reset")] * 10, retries=0), abort_after=2)
    assert r.judge("q", [], "a").faithfulness == 1.0
    for _ in range(5):
        assert r.judge("q", [], "a").faithfulness is None
    assert r.counts["failures"] == 5


def test_results_decided_by_rule_do_not_show_the_judge_works():
    refusal = JudgeResult(1.0, {"refusal": True, "by_rule": True})
    r, _ = runner(
        Scripted([refusal, refusal] + [OSError("refused")] * 10, retries=0), abort_after=2
    )
    assert r.judge("q", [], "a").faithfulness == 1.0 and r.judge("q", [], "a").faithfulness == 1.0
    assert r.judge("q", [], "a").faithfulness is None
    with pytest.raises(JudgeFailedError):
        r.judge("q", [], "a")


def test_verdicts_are_cached_by_identity_and_inputs(tmp_path):
    cache = StageCache(tmp_path)
    first = Scripted([JudgeResult(0.5, {"why": "x"})], identity={"model": "m1"})
    r1, _ = runner(first, cache=cache)
    assert r1.judge("q", ["c1", "c2"], "a", "ref").faithfulness == 0.5
    again = Scripted([], identity={"model": "m1"})
    r2, _ = runner(again, cache=cache)
    assert r2.judge("q", ["c1", "c2"], "a", "ref") == JudgeResult(0.5, {"why": "x"})
    assert again.calls == 0 and r2.counts["cache_hits"] == 1
    # any change of judge identity or input is a miss
    for ident, args in [
        ({"model": "m2"}, ("q", ["c1", "c2"], "a", "ref")),
        ({"model": "m1"}, ("q", ["c1"], "a", "ref")),
        ({"model": "m1"}, ("q", ["c1", "c2"], "b", "ref")),
        ({"model": "m1"}, ("q", ["c1", "c2"], "a", None)),
        ({"model": "m1"}, ("q2", ["c1", "c2"], "a", "ref")),
    ]:
        j = Scripted([], identity=ident)
        runner(j, cache=cache)[0].judge(*args)
        assert j.calls == 1, (ident, args)


def test_failures_are_not_cached(tmp_path):
    cache = StageCache(tmp_path)
    r, _ = runner(Scripted([ValueError("x")] * 3, identity={"m": 1}), cache=cache, abort_after=None)
    assert r.judge("q", ["c"], "a").faithfulness is None
    j = Scripted([JudgeResult(1.0)], identity={"m": 1})
    assert runner(j, cache=cache)[0].judge("q", ["c"], "a").faithfulness == 1.0 and j.calls == 1


def test_judges_without_identity_are_not_cached(tmp_path):
    cache = StageCache(tmp_path)
    j = Scripted([JudgeResult(1.0), JudgeResult(0.0)])
    r, _ = runner(j, cache=cache)
    assert r.judge("q", ["c"], "a").faithfulness == 1.0
    assert r.judge("q", ["c"], "a").faithfulness == 0.0 and not any(tmp_path.iterdir())


class Plain:
    """A judge that declares no optional capability."""

    def judge(self, query, contexts, response, reference=None):
        raise OSError("down")


def test_optional_capabilities_are_declared_protocols():
    from rag_lab.judge.base import Identified, RetryPolicy, TermAware
    from rag_lab.judge.nli import NLIJudge
    from rag_lab.judge.ragas import RagasJudge

    assert isinstance(Scripted([]), RetryPolicy) and not isinstance(Plain(), RetryPolicy)
    assert isinstance(Scripted([], identity={"m": 1}), Identified)
    assert not isinstance(Scripted([]), Identified)
    assert isinstance(LexicalJudge(), TermAware) and not isinstance(Plain(), TermAware)
    ragas = RagasJudge("http://127.0.0.1:9/v1", "m", retries=3)
    assert isinstance(ragas, Identified) and isinstance(ragas, RetryPolicy)
    assert JudgeRunner(ragas).retries == 3
    # an NLI judge's identity hashes its model (loading it): its retry policy is enough here
    assert isinstance(NLIJudge("some/nli-model", retries=1), RetryPolicy)


def test_a_judge_without_a_retry_policy_gets_one_attempt():
    r, sleeps = runner(Plain(), abort_after=None)
    assert (r.retries, r.backoff) == (0, 1.0)
    assert r.judge("q", ["c"], "a").faithfulness is None
    assert r.counts == {"calls": 1, "failures": 1} and sleeps == []
    # the caller's settings win over the judge's own
    r, sleeps = runner(
        Scripted([OSError("x")] * 5, retries=4, backoff=9.0), retries=1, backoff=0.25
    )
    r.judge("q", ["c"], "a")
    assert sleeps == [0.25]


def test_the_runner_passes_on_the_judges_term_analysis():
    lexical = LexicalJudge()
    assert JudgeRunner(lexical).terms is lexical.terms
    assert JudgeRunner(Plain()).terms is None
