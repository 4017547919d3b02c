"""rag_lab.dataset.squad: SQuAD v1/v2-format QA files as a retrieval set (unique contexts,
answers as evidence, unanswerable v2 questions as grade-0 near misses), and ``dataset=beir``
pointing at such files saying which loader to use."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rag_lab.dataset import BeirDataset, SquadDataset
from rag_lab.errors import DataError
from rag_lab.evaluate import evaluate
from tests.compose import compose_evaluate

PUMP = "The HX-200 pump stops when the oil temperature exceeds 70 °C. Fault E102 is then shown."
VALVE = "The relief valve of the HX-200 opens at 21 MPa. Replace its seal every 2000 hours."
CHILLER = "On the CH-30 chiller, E102 means a phase sequence fault. Swap two supply phases."

SQUAD_V2 = {
    "version": "v2.0",
    "data": [
        {
            "title": "HX-200",
            "paragraphs": [
                {
                    "context": PUMP,
                    "qas": [
                        {
                            "id": "a1",
                            "question": "At what oil temperature does the HX-200 pump stop?",
                            "answers": [
                                {"text": "70 °C", "answer_start": 55},
                                {"text": "70 °C", "answer_start": 55},  # SQuAD repeats answers
                            ],
                            "is_impossible": False,
                        },
                        {
                            "id": "a2",
                            "question": "Which fault code means low pump pressure on the HX-200?",
                            "answers": [],
                            "plausible_answers": [{"text": "E102", "answer_start": 69}],
                            "is_impossible": True,
                        },
                    ],
                },
                {
                    "context": VALVE,
                    "qas": [
                        {
                            "id": "a3",
                            "question": "How often should the relief valve seal be replaced?",
                            "answers": [{"text": "every 2000 hours", "answer_start": 63}],
                        }
                    ],
                },
            ],
        },
        {
            "title": "CH-30",
            "paragraphs": [
                {
                    "context": CHILLER,
                    "qas": [
                        {
                            "id": "a4",
                            "question": "What does E102 mean on the CH-30 chiller?",
                            "answers": [{"text": "a phase sequence fault", "answer_start": 32}],
                        }
                    ],
                },
                {"context": PUMP, "qas": []},  # the same paragraph again: one document
            ],
        },
    ],
}


def sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@pytest.fixture
def squad_dir(tmp_path) -> Path:
    folder = tmp_path / "squad"
    folder.mkdir()
    (folder / "dev-v2.0.json").write_text(json.dumps(SQUAD_V2, ensure_ascii=False), "utf-8")
    train = {"version": "1.1", "data": [SQUAD_V2["data"][1]]}
    (folder / "train-v1.1.json").write_text(json.dumps(train), "utf-8")
    return folder


def test_contexts_questions_answers_and_unanswerable(squad_dir, tmp_path):
    ds = SquadDataset(str(squad_dir / "dev-v2.0.json"), materialise_dir=str(tmp_path / "m")).load()
    assert (ds.name, ds.split) == ("dev-v2.0", "dev")
    docs = [json.loads(x) for x in ds.corpus_sources[0].read_text("utf-8").splitlines()]
    assert [(d["_id"], d["title"], d["text"]) for d in docs] == [
        (sha16(PUMP), "HX-200", PUMP),
        (sha16(VALVE), "HX-200", VALVE),
        (sha16(CHILLER), "CH-30", CHILLER),
    ]
    assert ds.qrels == {
        "a1": {sha16(PUMP): 1},
        "a2": {sha16(PUMP): 0},  # unanswerable: its paragraph is the near miss
        "a3": {sha16(VALVE): 1},
        "a4": {sha16(CHILLER): 1},
    }
    assert ds.queries["a1"].evidence == ("70 °C",)  # answers de-duplicated
    assert ds.queries["a2"].evidence == ()
    assert list(ds.queries["a2"].metadata["plausible_answers"]) == ["E102"]
    assert ds.queries["a3"].text == "How often should the relief valve seal be replaced?"
    assert ds.queries["a1"].category is None
    assert any(w.startswith("1 queries have no relevant document") for w in ds.warnings)
    titled = SquadDataset(
        str(squad_dir / "dev-v2.0.json"), title_as_category=True, materialise_dir=str(tmp_path)
    ).load()
    assert titled.queries["a4"].category == "CH-30"


def test_a_folder_selects_files_by_split(squad_dir, tmp_path):
    train = SquadDataset(str(squad_dir), split="train", materialise_dir=str(tmp_path)).load()
    assert (train.name, train.split) == ("squad", "train")
    assert set(train.queries) == {"a4"} and train.warnings == ()
    with pytest.raises(DataError, match=r"no \.json file with 'test' in its name \(files: "):
        SquadDataset(str(squad_dir), split="test", materialise_dir=str(tmp_path)).load()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d["data"][0]["paragraphs"][1]["qas"][0].pop("question"),
         r"dev-v2\.0\.json: data\[0\]\.paragraphs\[1\]\.qas\[0\]: missing key 'question'"),
        (lambda d: d["data"][1]["paragraphs"][0].update(context=None),
         r"data\[1\]\.paragraphs\[0\]\.context: expected str, got NoneType"),
        (lambda d: d["data"][1]["paragraphs"][0]["qas"][0].update(id="a1"),
         r"data\[1\]\.paragraphs\[0\]\.qas\[0\]: duplicate question id 'a1' \(first at .*"
         r"data\[0\]\.paragraphs\[0\]\.qas\[0\]\)"),
        (lambda d: d.pop("data"), r"dev-v2\.0\.json: missing key 'data'"),
    ],
)  # fmt: skip
def test_malformed_entries_are_named(squad_dir, tmp_path, edit, expected):
    data = json.loads(json.dumps(SQUAD_V2))
    edit(data)
    (squad_dir / "dev-v2.0.json").write_text(json.dumps(data), "utf-8")
    with pytest.raises(DataError, match=expected):
        SquadDataset(str(squad_dir), materialise_dir=str(tmp_path)).load()


def test_not_json_names_the_line(squad_dir, tmp_path):
    (squad_dir / "dev-v2.0.json").write_text('{"data": [\n  {"title": x}]}', "utf-8")
    with pytest.raises(DataError, match=r"dev-v2\.0\.json:2: malformed JSON"):
        SquadDataset(str(squad_dir), materialise_dir=str(tmp_path)).load()


def test_dataset_beir_on_squad_files_names_the_loader(squad_dir):
    for path in (squad_dir, squad_dir / "dev-v2.0.json"):
        with pytest.raises(DataError) as err:
            BeirDataset(str(path)).load()
        msg = str(err.value)
        assert msg == (
            f"{path} holds SQuAD-format QA (dev-v2.0.json), not the BEIR layout: "
            f"use dataset=squad dataset.path={path}"
        )


def test_evaluate_with_dataset_squad(squad_dir, tmp_path):
    cfg = compose_evaluate(
        [
            "dataset=squad",
            f"dataset.path={squad_dir}",
            "retrievers=[bm25]",
            "tracking=none",
            "cache.dir=null",
        ],
        tmp_path,
    )
    assert cfg.tokenizer._target_ == "rag_lab.tokenizer.AutoTokenizer"  # squad's default
    m = evaluate(cfg)
    assert (m["n_queries"], m["n_unanswerable"], m["n_documents"]) == (4, 1, 3)
    assert m["hit_rate_at_1"] == 1.0  # each answerable question's own paragraph ranks first
    assert m["evidence_hit_rate_at_1"] == 1.0  # and it holds the gold answer
