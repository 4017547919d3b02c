"""Judges side by side (``rag-lab judge`` with several ``--judge``): the table and the Markdown
summary of where they disagree, offline (two lexical settings, an NLI judge on a local model
folder), against the fake OpenAI endpoint (ragas), and judges that cannot run skipped cleanly."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rag_lab.cli.judge import run
from rag_lab.judge.evaluation.compare import pairwise, side_by_side
from tests.judge.evaluation.test_labels import ANSWERS, write, write_logs


def read_csv(path: Path) -> dict[str, dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return {r["id"]: r for r in csv.DictReader(fh)}


def test_pairwise_counts_on_a_small_table():
    items = {k: {"run": "r", "id": k, "query": "q", "response": "a"} for k in "abcd"}
    scores = {"x": {"a": 1.0, "b": 0.2, "c": 0.9, "d": None}, "y": {"a": 0.8, "b": 0.7, "c": 0.1}}
    verdicts = {
        "x": {"a": 1, "b": 0, "c": 1, "d": None},
        "y": {"a": 1, "b": 1, "c": 0, "d": 0},
    }
    table = side_by_side(items, scores, verdicts, {"b": 0, "c": 1})
    assert table["disagree"].tolist() == [False, True, True, False]
    assert table["n_judged"].tolist() == [2, 2, 2, 1]
    (p,) = pairwise(table, ["x", "y"])
    # a, b, c both judged; b and c disagree, both labelled, x right on both
    assert (p["n"], p["n_disagree"], p["n_labelled"], p["a_right"], p["b_right"]) == (3, 2, 2, 2, 0)
    assert p["agree"] == pytest.approx(1 / 3)
    assert p["mean_abs_diff"] == pytest.approx((0.2 + 0.5 + 0.8) / 3)


def test_two_lexical_settings_side_by_side(tmp_path, capsys):
    logs = write_logs(tmp_path / "logs.jsonl")
    labels = write(
        tmp_path / "labels.csv",
        "id,faithful\n" + "".join(f"{i},{lb}\n" for i, _, _, lb in ANSWERS),
    )
    report = tmp_path / "report"
    argv = [
        "--input", str(logs), "--out", str(tmp_path / "scores.jsonl"), "--labels", str(labels),
        "--judge", "lexical", "--judge", "strict=lexical",
        "--set", "strict.support_threshold=1.0", "--set", "strict.paraphrase_model=null",
        "--report-dir", str(report),
    ]  # fmt: skip
    assert run(argv) == 0, capsys.readouterr().err
    console = capsys.readouterr().out
    table = read_csv(report / "judges_side_by_side.csv")
    assert list(table) == [i for i, *_ in ANSWERS]
    # every word of "indicates"/"is" must now occur in the contexts (and no embedder supports a
    # paraphrase): the paraphrase fails strict
    a5 = table["a5"]
    assert float(a5["lexical"]) > float(a5["strict"]) and a5["disagree"] == "True"
    assert a5["lexical_verdict"] == "1" and a5["strict_verdict"] == "0" and a5["label"] == "1"
    n_disagree = sum(r["disagree"] == "True" for r in table.values())
    summary = (report / "judges_side_by_side.md").read_text(encoding="utf-8")
    assert "| lexical | strict | 10 | " in summary
    assert f"## lexical vs strict: {n_disagree} disagreements" in summary
    assert "E102 indicates that the oil pressure is low." in summary
    assert f"lexical vs strict: {n_disagree} of 10 answers disagree" in console
    # both judges' agreement with the labels in one report
    agreement = json.loads((report / "judge_labels.json").read_text())["judges"]
    assert set(agreement) == {"lexical", "strict"}
    scores = [json.loads(ln) for ln in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert [r["judge"] for r in scores] == ["lexical"] * 10 + ["strict"] * 10


def test_unavailable_judges_are_skipped_and_reported(tmp_path, capsys):
    from tests.fake_openai import free_port_url

    logs = write_logs(tmp_path / "logs.jsonl")
    argv = [
        "--input", str(logs), "--out", str(tmp_path / "s.jsonl"),
        "--judge", "lexical", "--judge", "nli", "--judge", "ragas",
        "--set", f"ragas.base_url={free_port_url()}", "--set", "ragas.model=m",
        "--set", "ragas.retries=0",
    ]  # fmt: skip
    assert run(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "nli judge: skipped (judge=nli needs model (e.g. --set nli.model=...))" in out
    assert "ragas judge: skipped (the judge" in out and "has not worked once" in out
    summary = (tmp_path / "judges_side_by_side.md").read_text()
    assert "Skipped `nli`" in summary and "Skipped `ragas`" in summary
    # nothing can run: an error, exit 2
    assert run([*argv[:4], "--judge", "nli", "--judge", "other=nli"]) == 2
    assert "error: no judge could be run: nli: judge=nli needs model" in capsys.readouterr().err
    # one judge alone is not skipped: its error is the command's
    assert run([*argv[:4], "--judge", "nli"]) == 2


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--judge", "lexical", "--judge", "lexical"], "label 'lexical' given twice"),
        (["--judge", "nope"], "unknown judge 'nope'"),
        (["--judge", "lexical", "--judge", "b=lexical", "--set", "x=1"], "LABEL.KEY=VALUE"),
        (["--threshold", "2"], "--threshold must be in [0, 1]"),
    ],
)
def test_judge_options_are_checked(tmp_path, capsys, extra, message):
    logs = write_logs(tmp_path / "logs.jsonl")
    assert run(["--input", str(logs), "--out", str(tmp_path / "s.jsonl"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_lexical_and_ragas_on_the_fake_endpoint(tmp_path, capsys):
    """The fake judge LLM supports a statement only when it occurs verbatim in the contexts: it
    rejects the paraphrase that the lexical judge accepts."""
    from tests.fake_openai import FakeOpenAI, route

    logs = write_logs(tmp_path / "logs.jsonl", ANSWERS[:5])
    with FakeOpenAI(route) as fake:
        argv = [
            "--input", str(logs), "--out", str(tmp_path / "s.jsonl"),
            "--judge", "lexical", "--judge", "ragas",
            "--set", f"ragas.base_url={fake.url}", "--set", "ragas.model=fake",
            "--set", "ragas.retries=0", "--set", "ragas.reference_metrics=false",
        ]  # fmt: skip
        assert run(argv) == 0, capsys.readouterr().err
    table = read_csv(tmp_path / "judges_side_by_side.csv")
    assert table["a1"]["ragas"] == "1.0" and table["a4"]["ragas_verdict"] == "0"
    assert table["a5"]["lexical_verdict"] == "1" and table["a5"]["ragas_verdict"] == "0"
    assert table["a5"]["disagree"] == "True" and table["a1"]["disagree"] == "False"
    summary = (tmp_path / "judges_side_by_side.md").read_text()
    assert "`ragas` score >= 0.5" in summary and "## lexical vs ragas" in summary


def test_an_nli_judge_on_a_local_model_folder(tmp_path, capsys):
    """``nli`` with any local model path: a tiny random classifier that entails everything
    (so it disagrees with the lexical judge on the changed code and number)."""
    pytest.importorskip("transformers")
    from tests.judge.test_nli import build

    (tmp_path / "nli").mkdir()
    model = build(tmp_path / "nli", entail_logit=6.0)
    logs = write_logs(tmp_path / "logs.jsonl", ANSWERS[:4])
    argv = [
        "--input", str(logs), "--out", str(tmp_path / "s.jsonl"),
        "--judge", "lexical", "--judge", "nli", "--set", f"nli.model={model}",
    ]  # fmt: skip
    assert run(argv) == 0, capsys.readouterr().err
    table = read_csv(tmp_path / "judges_side_by_side.csv")
    assert [table[i]["nli_verdict"] for i in ("a1", "a2", "a3", "a4")] == ["1"] * 4
    assert [table[i]["disagree"] for i in ("a1", "a2", "a3", "a4")] == [
        "False",
        "False",
        "True",
        "True",
    ]
