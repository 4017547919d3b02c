"""The walk's greedy rule against an evaluator whose per-query numbers are written down here: the
select split decides (never the report split), later steps build on kept steps only, exact ties
go to the tie-breakers, a step missing its requirement is skipped, and every step's paired
differences and CIs are the ones rag_lab.analysis.stats computes from the two tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.analysis.stats import paired_bootstrap_diff_ci, randomization_test
from rag_lab.analysis.walk import ALWAYS, Diff, decide, plan_from_dict, read_result, run_walk
from rag_lab.errors import ConfigError
from tests.analysis.walk.conftest import PLAN, Fake, N


def test_dev_decides_and_test_is_reported_for_every_step(walked):
    result, _, _ = walked
    decisions = [(s.name, s.kept, s.decided_by) for s in result.steps if not s.skipped]
    assert decisions == [
        ("base", None, ""),
        ("good", True, "hit_rate@5"),
        ("bad_on_dev", False, "hit_rate@5"),  # helps on test (+0.2): test never decides
        ("ndcg_only", True, "ndcg@10"),  # hit rate tied on dev: the tie-breaker decided
        ("nothing", False, "hit_rate@5"),  # every metric tied: dropped
    ]
    bad = next(s for s in result.steps if s.name == "bad_on_dev")
    assert bad.diffs["test"]["hit_rate_at_5"].mean == pytest.approx(3 / N)  # q08 was a hit
    assert bad.diffs["dev"]["hit_rate_at_5"].mean == pytest.approx(-2 / N)
    for s in result.steps:
        if not s.skipped:
            assert set(s.means) == {"dev", "test"}


def test_steps_build_on_kept_steps_only(walked):
    _, fake, _ = walked
    by_step = [o for o, split in fake.calls if split == "dev"]
    assert len(by_step) == 5  # base + 4 run steps; the skipped one runs nothing
    assert by_step[2] == (
        "experiment=tutorial_rag",
        "good=on",
        "bad_on_dev=on",
        "embedder=hashing",
        "dataset.split=dev",
    )
    assert "bad_on_dev=on" not in by_step[3] and "good=on" in by_step[3]
    assert "ndcg_only=on" in by_step[4]


def test_a_step_missing_its_requirement_is_skipped_and_says_why(walked):
    result, _, _ = walked
    step = next(s for s in result.steps if s.name == "model")
    assert step.kept is None and step.skipped == "needs x.model=..."
    assert not step.means and not step.diffs


def test_cis_are_the_paired_statistics_of_the_two_tables(walked):
    result, fake, _ = walked
    good = result.steps[1]
    d = good.diffs["test"]["hit_rate_at_5"]
    base, cand = (
        fake(o[:-1] + ("dataset.split=test",), "test", Path())
        for o in (fake.calls[1][0], fake.calls[3][0])
    )
    a, b = cand["hit_rate_at_5"].to_numpy(), base["hit_rate_at_5"].to_numpy()
    mean, low, high = paired_bootstrap_diff_ci(a, b, 500, 0.05, 3)
    assert (d.mean, d.low, d.high) == pytest.approx((mean, low, high))
    assert d.mean == pytest.approx(3 / N) and d.low <= d.mean <= d.high and d.high > d.low
    assert d.p == pytest.approx(randomization_test(a, b, seed=3)) and d.n == N
    # lower noise is better: the step that adds hits lowers it
    assert good.diffs["test"]["noise_ratio_at_5"].mean == pytest.approx(-1.5 / N)


def test_per_category_means_and_differences(walked):
    result, _, _ = walked
    good = result.steps[1]
    # test: queries 2, 5, 7 become hits; 5, 7 are odd (code), 2 even (prose, a base miss)
    assert good.category_diffs["test"]["code"]["hit_rate_at_5"] == pytest.approx(2 / 10)
    assert good.category_diffs["test"]["prose"]["hit_rate_at_5"] == pytest.approx(1 / 10)
    assert good.by_category["test"]["code"]["hit_rate_at_5"] == pytest.approx(2 / 10)


def test_walk_json_reads_back_as_the_result(walked):
    result, _, out = walked
    again = read_result(out)
    assert again.plan == result.plan
    assert [(s.name, s.kept, s.skipped, s.decided_by) for s in again.steps] == [
        (s.name, s.kept, s.skipped, s.decided_by) for s in result.steps
    ]
    assert again.steps[1].diffs == result.steps[1].diffs
    assert again.final_overrides == result.final_overrides
    assert "ndcg_only=on" in result.final_overrides and "bad_on_dev=on" not in (
        result.final_overrides
    )


def test_decide_is_direction_aware_and_respects_min_gain():
    up, down, tie = Diff(0.1, 0, 0.2, 0.1, 9), Diff(-0.1, -0.2, 0, 0.1, 9), Diff(0, 0, 0, 1, 9)
    assert decide({"noise_ratio_at_5": down}, ["noise_ratio@5"], 0.0) == (True, "noise_ratio@5")
    assert decide({"noise_ratio_at_5": up}, ["noise_ratio@5"], 0.0) == (False, "noise_ratio@5")
    assert decide({"hit_rate_at_5": up}, ["hit_rate@5"], 0.1) == (False, "hit_rate@5")
    both = {"hit_rate_at_5": tie, "noise_ratio_at_5": down}
    assert decide(both, ["hit_rate@5", "noise_ratio@5"], 0.5) == (True, "noise_ratio@5")


def test_a_prerequisite_is_kept_whatever_it_measures(tmp_path):
    plan = plan_from_dict(
        {
            "base": ["experiment=tutorial_rag"],
            "tie_break": ["ndcg@10"],
            "ci": {"n_resamples": 100},
            "steps": [
                {"name": "contract", "overrides": ["nothing=on"], "always": True},
                {"name": "good", "overrides": ["good=on"]},
            ],
        }
    )
    result = run_walk(plan, Fake(), tmp_path)
    contract = result.steps[1]
    assert (contract.kept, contract.decided_by) == (True, ALWAYS)
    assert contract.diffs["dev"]["hit_rate_at_5"].mean == 0.0  # tied, reported all the same
    assert "nothing=on" in result.final_overrides and "good=on" in result.final_overrides
    assert read_result(tmp_path).steps[1].decided_by == ALWAYS
    with pytest.raises(ConfigError, match=r"steps\[0\]\.always"):
        plan_from_dict({"steps": [{"name": "a", "always": "yes"}]})


def test_a_step_that_cannot_run_on_the_kept_steps_is_skipped(tmp_path):
    class Refusing(Fake):
        def __call__(self, overrides, split, run_dir):
            if "broken=on" in overrides:
                raise ConfigError("fallback.levels.x.retrievers: bm25 — not in the pipeline")
            return super().__call__(overrides, split, run_dir)

    plan = plan_from_dict(
        {
            "base": ["experiment=tutorial_rag"],
            "ci": {"n_resamples": 100},
            "steps": [
                {"name": "broken", "overrides": ["broken=on"]},
                {"name": "good", "overrides": ["good=on"]},
            ],
        }
    )
    result = run_walk(plan, Refusing(), tmp_path)
    broken = result.steps[1]
    assert broken.kept is None and broken.skipped.startswith("cannot run on the kept steps: ")
    assert "bm25" in broken.skipped
    assert result.steps[2].kept is True and "broken=on" not in result.steps[2].overrides


def test_a_step_that_needs_a_model_is_trained_first_and_uses_it(tmp_path):
    """A step with ``train`` overrides and no model given: the trainer runs once (with the walk's
    dataset overrides), its model folder becomes the step's own override, kept with the step."""
    trained: list[tuple[tuple[str, ...], Path]] = []

    def trainer(overrides, out):
        trained.append((tuple(overrides), out))
        return out / "model"

    plan = plan_from_dict(
        {
            "base": ["experiment=tutorial_rag"],
            "ci": {"n_resamples": 100},
            "steps": [
                {
                    "name": "ce",
                    "overrides": ["good=on"],
                    "requires": ["x.model"],
                    "train": ["train.max_steps=3"],
                },
                {"name": "after", "overrides": ["nothing=on"]},
            ],
        }
    )
    fake = Fake()
    extra = ["dataset.path=/data/kb", "generator=extractive"]
    result = run_walk(plan, fake, tmp_path, extra, train=trainer)
    assert trained == [(("dataset.path=/data/kb", "train.max_steps=3"), tmp_path / "models" / "ce")]
    ce = result.steps[1]
    assert ce.kept is True and not ce.skipped
    assert f"x.model={tmp_path / 'models' / 'ce' / 'model'}" in ce.overrides
    assert f"x.model={tmp_path / 'models' / 'ce' / 'model'}" in result.steps[2].overrides
    assert read_result(tmp_path).plan.steps[0].train == ("train.max_steps=3",)


def test_a_failed_training_skips_the_step_and_says_why(tmp_path):
    def trainer(overrides, out):
        raise ConfigError("train.model=nowhere: no such model")

    plan = plan_from_dict(
        {
            "base": ["experiment=tutorial_rag"],
            "ci": {"n_resamples": 100},
            "steps": [{"name": "ce", "requires": ["x.model"], "train": []}],
        }
    )
    result = run_walk(plan, Fake(), tmp_path, train=trainer)
    assert result.steps[1].skipped == "training failed: train.model=nowhere: no such model"


def test_the_real_trainer_reports_a_failed_training_in_one_line(tmp_path):
    """train_step runs rag-lab train reranker in a process of its own; a bad override is one
    ConfigError line, and no model folder is claimed."""
    from rag_lab.analysis.walk import train_step

    with pytest.raises(ConfigError, match=r"walk training \(train\.no_such_key=1\)") as err:
        train_step(["train.no_such_key=1"], tmp_path / "ce")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "ce" / "model").exists()


def test_a_training_killed_by_a_signal_says_so(tmp_path, monkeypatch):
    """A training process the kernel killed (the out-of-memory killer sends SIGKILL) is reported
    as killed, not by whatever a library last printed to stderr. The process is real: a Python
    child that warns on stderr and then kills itself with SIGKILL."""
    import subprocess
    import sys

    from rag_lab.analysis import walk

    real_run = subprocess.run
    suicide = (
        "import os, signal, sys; print('some library warning', file=sys.stderr, flush=True); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )

    def run(command, **kwargs):
        return real_run([sys.executable, "-c", suicide], **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    with pytest.raises(ConfigError) as err:
        walk.train_step(["train.max_steps=1"], tmp_path / "ce")
    message = str(err.value)
    assert "killed by SIGKILL" in message and "out-of-memory" in message
    assert "some library warning" not in message and "\n" not in message


def test_splits_evaluated_at_once_give_the_sequential_walk(tmp_path):
    """workers= (a step's dev and test at the same time) changes nothing in the result."""
    from concurrent.futures import ThreadPoolExecutor

    plan = plan_from_dict(PLAN)
    alone = run_walk(plan, Fake(), tmp_path / "alone", ["embedder=hashing"])
    fake = Fake()
    with ThreadPoolExecutor(2) as pool:
        both = run_walk(plan, fake, tmp_path / "both", ["embedder=hashing"], workers=pool)
    assert [(s.name, s.kept, s.decided_by, s.skipped) for s in both.steps] == [
        (s.name, s.kept, s.decided_by, s.skipped) for s in alone.steps
    ]
    assert [s.means for s in both.steps] == [s.means for s in alone.steps]
    assert [s.diffs for s in both.steps] == [s.diffs for s in alone.steps]
    assert {split for _, split in fake.calls} == {"dev", "test"}
