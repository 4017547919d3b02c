"""``rag-lab judge --labels``: the labels file (JSONL / CSV, validated with file:line:key errors),
matched to logged answers and to run folders of ``rag-lab evaluate``, and the agreement / PPI
report it produces, checked against the per-line scores it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rag_lab.analysis.stats import ppi_mean_ci
from rag_lab.cli.judge import run
from rag_lab.errors import DataError
from rag_lab.judge.evaluation.labels import match_labels, read_labels
from rag_lab.judge.evaluation.logs import read_inputs

CTX = [
    "Fault E102 means low oil pressure. Check the oil level and the pump.",
    "Replace the compressor filter every 2000 hours.",
]
# (id, query, response, human label): answers as a generator gives them, labelled by hand
ANSWERS = [
    ("a1", "What does E102 mean?", "Fault E102 means low oil pressure.", 1),
    ("a2", "Filter interval?", "Replace the compressor filter every 2000 hours.", 1),
    ("a3", "Filter interval?", "Replace the compressor filter every 3000 hours.", 0),
    ("a4", "What does E120 mean?", "Fault E120 means low oil pressure.", 0),
    ("a5", "What does E102 mean?", "E102 indicates that the oil pressure is low.", 1),
    (
        "a6",
        "What does E102 mean?",
        "Fault E102 means low oil pressure. Check the oil level and the pump. "
        "The warranty covers the pump for five years.",
        0,
    ),
    ("a7", "Who made it?", "I cannot tell from the provided context.", 1),
    ("a8", "What to do on E102?", "Check the oil level and the pump when E102 appears.", 1),
    ("a9", "What does E102 mean?", "E102: low oil pressure; check the oil level.", 1),
    ("a10", "Filter interval?", "Every 2000 hours, and the oil every 500 hours.", 0),
]


def write_logs(path: Path, answers=ANSWERS, ids=True) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i, q, r, _ in answers:
            rec = {"query": q, "retrieved_contexts": CTX, "response": r}
            fh.write(json.dumps({"id": i, **rec} if ids else rec) + "\n")
    return path


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- the file ---------------------------------------------------------------------------------


def test_jsonl_and_csv_labels_read_alike(tmp_path):
    jl = write(
        tmp_path / "l.jsonl",
        '{"id": "a1", "faithful": 1}\n\n{"id": 7, "faithful": false, "note": "x"}\n'
        '{"run": "r", "id": "a3", "faithful": "0"}\n',
    )
    csv = write(tmp_path / "l.csv", "\ufeffid,faithful,run,note\na1,1,,\n\n7,0,,x\na3,0,r,\n")
    for path in (jl, csv):
        got = [(lb.run, lb.id, lb.faithful) for lb in read_labels(path)]
        assert got == [(None, "a1", 1), (None, "7", 0), ("r", "a3", 0)], path
    assert read_labels(csv)[2].where == f"{csv}:5"


@pytest.mark.parametrize(
    "name, text, message",
    [
        (
            "l.jsonl",
            '{"id": "a", "faithful": 1}\n{"faithful": 1}\n',
            ":2: missing required key 'id'",
        ),
        ("l.jsonl", '{"id": "a"}\n', ":1: missing required key 'faithful'"),
        ("l.jsonl", '{"id": "a", "faithful": 0.5}\n', ":1: 'faithful' must be 0 or 1, got 0.5"),
        ("l.csv", "id,faithful\na,1\nb,yes\n", ":3: 'faithful' must be 0 or 1, got 'yes'"),
        ("l.csv", "id,verdict\na,1\n", ":1: 'faithful': missing column"),
        ("l.jsonl", '{"id": ["a"], "faithful": 1}\n', ":1: 'id' must be a string or an integer"),
        (
            "l.csv",
            "id,faithful\na,1\nb,0\na,0\n",
            ":4: 'id': a second label for 'a' (first at ",
        ),
        ("l.jsonl", '{"id": "a", "faithful": 1\n', ":1: malformed JSON"),
        ("l.csv", "id,faithful\n", ": no labels"),
        ("l.tsv", "id\tfaithful\n", ": labels must be a .jsonl or .csv file"),
    ],
)
def test_bad_labels_name_file_line_and_key(tmp_path, name, text, message):
    path = write(tmp_path / name, text)
    with pytest.raises(DataError) as err:
        read_labels(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_labels_are_matched_by_id_line_and_run(tmp_path):
    one = read_inputs([write_logs(tmp_path / "logs.jsonl")])
    labels = read_labels(write(tmp_path / "l.csv", "id,faithful\na2,1\na4,0\n"))
    assert match_labels(labels, one) == {(0, 2): 1, (0, 4): 0}
    # without ids, the key is the line number
    no_ids = read_inputs([write_logs(tmp_path / "noid.jsonl", ids=False)])
    assert match_labels(read_labels(write(tmp_path / "n.csv", "id,faithful\n3,0\n")), no_ids) == {
        (0, 3): 0
    }


def test_label_errors_name_the_label_line(tmp_path):
    for d in ("sweep/0", "sweep/1", "other/1"):
        (tmp_path / d).mkdir(parents=True)
        write_logs(tmp_path / d / "answers.jsonl")
    runs = [tmp_path / "sweep/0", tmp_path / "sweep/1"]
    inputs = read_inputs(runs)

    def error(text: str) -> str:
        with pytest.raises(DataError) as err:
            match_labels(read_labels(write(tmp_path / "l.csv", text)), inputs)
        return str(err.value)

    # by folder name, or by the path as given
    ok = f"run,id,faithful\n0,a1,1\n{runs[1]},a1,0\n"
    assert match_labels(read_labels(write(tmp_path / "l.csv", ok)), inputs) == {
        (0, 1): 1,
        (1, 1): 0,
    }
    assert (
        error("id,faithful\na1,1\n") == f"{tmp_path}/l.csv:2: 'run': required with several inputs"
    )
    assert "l.csv:3: 'run': no input named '2' (inputs: " in error(
        "run,id,faithful\n0,a1,1\n2,a1,1\n"
    )
    assert "l.csv:2: 'id': " in error("run,id,faithful\n1,zz,1\n")
    assert "has no answer with id 'zz'" in error("run,id,faithful\n1,zz,1\n")
    both = read_inputs([tmp_path / "sweep/1", tmp_path / "other/1"])
    with pytest.raises(DataError, match="'run': '1' names several inputs"):
        match_labels(read_labels(write(tmp_path / "l.csv", "run,id,faithful\n1,a1,1\n")), both)


def test_an_id_two_records_share_cannot_be_labelled(tmp_path):
    logs = write_logs(tmp_path / "logs.jsonl", [ANSWERS[0], ANSWERS[0], ANSWERS[1]])
    inputs = read_inputs([logs])
    with pytest.raises(DataError, match=r"l.csv:2: 'id': 'a1' names 2 answers .* \(lines 1, 2\)"):
        match_labels(read_labels(write(tmp_path / "l.csv", "id,faithful\na1,1\n")), inputs)
    assert match_labels(read_labels(write(tmp_path / "m.csv", "id,faithful\na2,1\n")), inputs)


def test_a_folder_without_answers_is_refused(tmp_path):
    with pytest.raises(DataError, match="no answers.jsonl in this folder"):
        read_inputs([tmp_path])
    logs = write_logs(tmp_path / "logs.jsonl")
    with pytest.raises(DataError, match="input given twice"):
        read_inputs([logs, logs])


# --- the command ------------------------------------------------------------------------------


def lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines()]


def test_judge_with_labels_reports_agreement_and_ppi(tmp_path, capsys):
    logs = write_logs(tmp_path / "logs.jsonl")
    labelled = ANSWERS[:6]  # the first six answers carry human labels, the rest do not
    labels = write(
        tmp_path / "labels.jsonl",
        "".join(json.dumps({"id": i, "faithful": lb}) + "\n" for i, _, _, lb in labelled),
    )
    out = tmp_path / "out" / "scores.jsonl"
    assert run(["--input", str(logs), "--out", str(out), "--labels", str(labels)]) == 0
    console = capsys.readouterr().out
    rows = {r["id"]: r for r in lines(out)}
    report = json.loads((tmp_path / "out" / "judge_labels.json").read_text())
    lex = report["judges"]["lexical"]
    # the report's numbers are those of the scores written, against the labels
    y = np.array([lb for *_, lb in labelled], dtype=float)
    verdict = np.array([float(rows[i]["faithful"]) for i, *_ in labelled])
    assert lex["agreement"]["n"] == 6
    assert lex["agreement"]["accuracy"] == pytest.approx(float((verdict == y).mean()))
    f = np.array([rows[i]["faithfulness"] for i, *_ in labelled])
    fu = np.array([rows[i]["faithfulness"] for i, *_ in ANSWERS[6:]])
    ppi = lex["runs"][str(logs)]["faithfulness"]
    ref = ppi_mean_ci(y, f, fu)
    assert ppi["estimate"] == pytest.approx(ref.estimate)
    assert (ppi["low"], ppi["high"]) == pytest.approx((max(ref.low, 0), min(ref.high, 1)))
    assert ppi["judged"] == pytest.approx(np.mean([r["faithfulness"] for r in rows.values()]))
    assert (ppi["n_answers"], ppi["n_labelled"]) == (10, 6)
    # clear-cut answers: a changed code is unfaithful, a copied sentence faithful, for the judge too
    assert rows["a4"]["faithfulness"] == 0.0 and rows["a1"]["faithfulness"] == 1.0
    assert "agreement with 6 labels" in console and "PPI" in console
    assert f"{ppi['estimate']:.4f} [{ppi['low']:.4f}, {ppi['high']:.4f}]" in console
    assert report["verdicts"] == {"lexical": lex["verdict"]}


def test_bad_labels_exit_2_before_judging(tmp_path, capsys):
    logs = write_logs(tmp_path / "logs.jsonl")
    labels = write(tmp_path / "labels.csv", "id,faithful\na1,1\nnope,0\n")
    out = tmp_path / "scores.jsonl"
    assert run(["--input", str(logs), "--out", str(out), "--labels", str(labels)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"error: {labels}:3: 'id': {logs} has no answer with id 'nope'")
    assert not out.exists()


def test_run_folders_of_a_sweep_are_judged_per_configuration(tmp_path, capsys):
    """Two configurations of ``rag-lab evaluate`` (answers from 1 or 3 chunks): their run folders
    hold ``answers.jsonl``; labels name answers by folder name and query id; each configuration
    gets its own PPI estimate."""
    from rag_lab.evaluate import evaluate
    from tests.compose import TOY_OVERRIDES, compose_evaluate

    folders = []
    (tmp_path / "sweep").mkdir()
    for k in (1, 3):
        cfg = compose_evaluate(
            [
                *TOY_OVERRIDES,
                "retrievers=[bm25]",
                "tracking=none",
                "generator=extractive",
                "judge=lexical",
                f"evaluation.answer_k={k}",
            ],
            tmp_path / f"k{k}",
        )
        evaluate(cfg)
        folders.append(Path(cfg.paths.output_dir).rename(tmp_path / "sweep" / f"k{k}"))
    logged = lines(folders[0] / "answers.jsonl")
    assert {"id", "query", "retrieved_contexts", "response", "faithfulness"} <= set(logged[0])
    assert all(len(r["retrieved_contexts"]) <= 1 for r in logged)
    qids = [r["id"] for r in logged]
    # a labeller disagreed with the judge on one answer of k1
    text = "run,id,faithful\n" + "".join(
        f"{run_name},{q},{0 if (run_name, q) == ('k1', qids[0]) else 1}\n"
        for run_name in ("k1", "k3")
        for q in qids[:4]
    )
    labels = write(tmp_path / "labels.csv", text)
    out = tmp_path / "report" / "scores.jsonl"
    capsys.readouterr()
    argv = ["--input", *map(str, folders), "--out", str(out), "--labels", str(labels)]
    assert run(argv) == 0, capsys.readouterr().err
    report = json.loads((out.parent / "judge_labels.json").read_text())
    runs = report["judges"]["lexical"]["runs"]
    assert list(runs) == [str(f) for f in folders]
    k1, k3 = (runs[str(f)]["faithfulness"] for f in folders)
    assert k1["n_answers"] == k3["n_answers"] == len(qids) and k1["n_labelled"] == 4
    # the judge called every extractive answer faithful; the labels correct k1 by -1/4
    assert k3["rectifier"] == pytest.approx(0.0) and k1["rectifier"] == pytest.approx(-0.25)
    assert k1["estimate"] == pytest.approx(k1["judged"] - 0.25)
    assert {r["run"] for r in lines(out)} == {str(f) for f in folders}
