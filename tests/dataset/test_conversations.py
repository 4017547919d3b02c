"""rag_lab.dataset.conversations: a multi-turn query set's history, filled from conversation_id +
turn or given as metadata.history, and one-line errors naming file:line for bad turns; the sample
dataset's conversations split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_lab.dataset import BeirDataset, read_qrels, read_queries
from rag_lab.errors import DataError
from rag_lab.paths import SAMPLE_DIR

KB = SAMPLE_DIR / "maintenance_kb"


def write(tmp_path: Path, *records: dict) -> Path:
    path = tmp_path / "queries.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path


def turn(qid: str, text: str, conv: object, n: object) -> dict:
    return {"_id": qid, "text": text, "metadata": {"conversation_id": conv, "turn": n}}


def test_history_is_filled_from_conversation_and_turn_in_turn_order(tmp_path):
    path = write(
        tmp_path,
        turn("b3", "怎么处理？", "b", 3),  # out of file order on purpose
        turn("a1", "E102 是什么", "a", 1),
        turn("b1", "CH-30 E210", "b", 1),
        turn("a2", "它对应哪个手册章节？", "a", 2),
        turn("b2", "它的设定值？", "b", 2),
        {"_id": "solo", "text": "SV0432"},
    )
    qs = read_queries(path)
    assert qs["a1"].history == () and qs["solo"].history == ()
    assert qs["a2"].history == ("E102 是什么",)
    assert qs["b3"].history == ("CH-30 E210", "它的设定值？")
    assert qs["b3"].metadata["turn"] == 3 and list(qs) == ["b3", "a1", "b1", "a2", "b2", "solo"]


def test_explicit_history(tmp_path):
    path = write(tmp_path, {"_id": "q", "text": "它呢", "metadata": {"history": ["E102", "E105"]}})
    assert read_queries(path)["q"].history == ("E102", "E105")


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([turn("a1", "x", "a", 1), turn("a3", "y", "a", 3)], r":2: conversation 'a' has no turn 2"),
        (
            [turn("a1", "x", "a", 1), turn("b", "y", "a", 1)],
            r":2: .*turn 1 twice \(first at .*:1\)",
        ),
        ([turn("a1", "x", "a", 0)], r":1: metadata.turn must be an integer >= 1, got 0"),
        ([turn("a1", "x", "a", "1")], r":1: metadata.turn must be an integer"),
        ([turn("a1", "x", "a", True)], r":1: metadata.turn must be an integer"),
        ([turn("a1", "x", "", 1)], r":1: metadata.conversation_id must be a non-empty string"),
        ([{"_id": "a", "text": "x", "metadata": {"turn": 2}}], r":1: metadata.conversation_id is"),
        (
            [{"_id": "a", "text": "x", "metadata": {"conversation_id": "c"}}],
            r":1: metadata.turn is",
        ),
        (
            [{"_id": "a", "text": "x", "metadata": {"history": "E102"}}],
            r":1: metadata.history must",
        ),
        ([{"_id": "a", "text": "x", "metadata": {"history": ["E102", ""]}}], "history must be"),
        (
            [{"_id": "a", "text": "x", "metadata": {"history": [], "conversation_id": "c"}}],
            r":1: give metadata.history or metadata.conversation_id \+ turn, not both",
        ),
    ],
)
def test_bad_turns_are_one_line_errors_naming_file_and_line(tmp_path, records, message):
    with pytest.raises(DataError, match=message) as err:
        read_queries(write(tmp_path, *records))
    assert "\n" not in str(err.value) and "queries.jsonl" in str(err.value)


def test_sample_conversations_split():
    data = BeirDataset(str(KB), split="conversations", corpus="docs", queries="conversations.jsonl")
    loaded = data.load()
    conversations = {q.metadata["conversation_id"] for q in loaded.queries.values()}
    follow_ups = [q for q in loaded.queries.values() if q.history]
    assert 10 <= len(conversations) <= 20 and len(loaded.queries) == 39
    assert all(
        q.category == ("follow_up" if q.history else "first_turn") for q in loaded.queries.values()
    )
    assert len(follow_ups) == 22 and all(1 <= len(q.history) <= 2 for q in follow_ups)
    assert loaded.queries["c01-t2"].history == ("HX-200 液压站 E102 是什么",)
    texts = " ".join(q.text for q in loaded.queries.values())
    assert "它" in texts and " it" in texts  # Chinese and English follow-ups that point back
    # every judged document is one the sample's other splits judge too: ids from the corpus
    known = {
        d
        for s in ("test", "dev")
        for r in read_qrels(KB / "qrels" / f"{s}.tsv").values()
        for d in r
    }
    judged = {d for r in loaded.qrels.values() for d in r}
    assert judged <= known and all(any(g > 0 for g in r.values()) for r in loaded.qrels.values())
