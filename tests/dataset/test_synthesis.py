"""rag_lab.dataset.synthesis: questions from a fake OpenAI-compatible endpoint over the toy corpus;
a quote that is not in its chunk drops the question; the review file becomes a BEIR split that
``evaluate`` scores."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from rag_lab.dataset.synthesis import (
    parse_reply,
    quote_in,
    read_review,
    synthesize,
    write_review,
    write_split,
)
from rag_lab.errors import ConfigError, DataError
from rag_lab.evaluate import evaluate
from rag_lab.generator import ExtractiveGenerator, OpenAIGenerator
from tests.cli.helpers import cli
from tests.compose import TOY, compose_evaluate
from tests.fake_openai import FakeOpenAI, last_user_text

PASSAGE = re.compile(r"(?:Passage:|段落：)\n(.*?)\n\n", re.S)


def reply(body: dict) -> str:
    """Per chunk: one question quoting its first sentence, one with an invented quote, a chat
    line that is no JSON."""
    passage = PASSAGE.search(last_user_text(body)).group(1)
    first = re.split(r"(?<=[.。])\s*", passage)[0]
    return "\n".join(
        [
            "Sure, here are the questions:",
            json.dumps({"question": f"What about {passage[:24]}?", "quote": first}),
            json.dumps(
                {"question": "Is it safe at 900 °C?", "quote": "The unit is rated for 900 °C."}
            ),
        ]
    )


def test_quote_check_and_reply_parsing():
    assert quote_in("oil  is TOO hot", "Fault E102 means the hydraulic oil is too hot.")
    assert not quote_in("oil is very hot", "Fault E102 means the hydraulic oil is too hot.")
    assert not quote_in("oil", "oil")  # shorter than min_chars: not evidence
    pairs, bad = parse_reply(
        '```json\n1. {"question": "q?", "quote": "x"}\n{"question": 3}\nhi\n```'
    )
    assert pairs == [("q?", "x")] and bad == 2


def test_synthesis_keeps_verbatim_quotes_only(toy_chunks, tmp_path):
    with FakeOpenAI(reply) as fake:
        gen = OpenAIGenerator(fake.url, "fake", retries=0, api_key_env=None)
        out = synthesize(toy_chunks, gen, per_chunk=2, max_chunks=None, min_chars=20)
        assert len(fake.requests) == len(toy_chunks) == 8
    assert (out.n_chunks, out.n_generated, out.n_quote_not_in_source) == (8, 16, 8)
    assert out.share_kept == 0.5 and out.n_unparsed_lines == 8
    assert all(quote_in(c.quote, c.passage) for c in out.kept)
    assert {c.doc_id for c in out.kept} == {f"d{i}" for i in range(1, 9)}
    assert out.samples_dropped[0]["quote"] == "The unit is rated for 900 °C."
    with pytest.raises(ConfigError, match="writes no text of its own"):
        synthesize(toy_chunks, ExtractiveGenerator())


def test_review_file_becomes_a_split_that_evaluates(toy_chunks, tmp_path):
    with FakeOpenAI(reply) as fake:
        gen = OpenAIGenerator(fake.url, "fake", retries=0, api_key_env=None)
        kept = synthesize(toy_chunks, gen, per_chunk=2, max_chunks=None, min_chars=20).kept
    review = write_review(tmp_path / "review.jsonl", kept)
    lines = [json.loads(x) for x in review.read_text(encoding="utf-8").splitlines()]
    assert {r["status"] for r in lines} == {"pending"}
    with pytest.raises(DataError, match=r"review\.jsonl:1: still pending"):
        read_review(review)
    lines[0]["status"] = "reject"
    lines[1].update(status="edit", question="How hot may the hydraulic oil get?")
    for r in lines[2:]:
        r["status"] = "accept"
    review.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), "utf-8")
    queries, qrels = read_review(review)
    assert len(queries) == 7 and lines[0]["id"] not in queries
    assert queries[lines[1]["id"]].text == "How hot may the hydraulic oil get?"
    assert queries[lines[2]["id"]].evidence == (lines[2]["quote"],)
    # an edit that breaks the quote is refused, naming the line
    bad = [*lines[:3], {**lines[3], "status": "edit", "quote": "not in the passage at all"}]
    review.write_text("".join(json.dumps(r) + "\n" for r in bad), "utf-8")
    with pytest.raises(DataError, match=r"review\.jsonl:4: the quote is not in the passage"):
        read_review(review)
    data = shutil.copytree(TOY, tmp_path / "toy")
    write_split(data, "synthetic", queries, qrels)
    cfg = compose_evaluate(
        [
            "dataset=beir",
            f"dataset.path={data}",
            "dataset.queries=queries_synthetic.jsonl",
            "dataset.split=synthetic",
            "retrievers=[bm25]",
            "tokenizer=jieba",
            "tracking=none",
            "cache.dir=null",
        ],
        tmp_path,
    )
    m = evaluate(cfg)
    assert m["n_queries"] == 7 and 0.0 < m["hit_rate_at_5"] <= 1.0
    assert "evidence_hit_rate_at_5" in m  # the quotes are evidence


def test_the_command_writes_a_review_file_then_the_split(tmp_path):
    """``rag-lab synthesize`` end to end: candidates for review from the toy corpus through the
    fake endpoint, then the reviewed file as a split of a copy of the dataset."""
    from tests.cli.helpers import error_line

    data = shutil.copytree(TOY, tmp_path / "toy")
    common = [
        "dataset=beir",
        f"dataset.path={data}",
        "retrievers=[bm25]",
        "tokenizer=jieba",
        "tracking=none",
        "cache.dir=null",
        "synthesis.min_chars=20",
        "synthesis.max_chunks=null",
    ]
    with FakeOpenAI(reply) as fake:
        proc = cli(
            "synthesize",
            *common,
            "generator=openai",
            f"generator.base_url={fake.url}",
            "generator.model=fake",
            "generator.retries=0",
            f"hydra.run.dir={tmp_path / 'run'}",
        )
    assert proc.returncode == 0, proc.stderr
    assert "8 of 16 questions kept (8 quotes not in their chunk, 8 chunks asked)" in proc.stdout
    summary = json.loads((tmp_path / "run" / "synthesis.json").read_text(encoding="utf-8"))
    assert summary["share_kept"] == 0.5 and summary["kept"] == 8
    review = tmp_path / "run" / "review.jsonl"
    # a pending file is refused with the line named; accept_pending takes it as reviewed
    proc = cli("synthesize", *common, f"synthesis.review={review}", f"hydra.run.dir={tmp_path}/r2")
    assert proc.returncode == 2 and "review.jsonl:1: still pending" in error_line(proc)
    proc = cli(
        "synthesize",
        *common,
        f"synthesis.review={review}",
        "synthesis.accept_pending=true",
        f"hydra.run.dir={tmp_path}/r3",
    )
    assert proc.returncode == 0, proc.stderr
    assert len((data / "queries_synthetic.jsonl").read_text(encoding="utf-8").splitlines()) == 8
    assert (data / "qrels" / "synthetic.tsv").is_file()
    # without an LLM generator: one line, exit 2
    proc = cli("synthesize", *common, f"hydra.run.dir={tmp_path}/r4")
    assert proc.returncode == 2 and "synthesis needs an LLM generator" in error_line(proc)
