"""Labelled queries synthesised from a corpus, kept only where the model's evidence is verbatim.

An LLM generator (``openai`` or ``transformers``: ``rag_lab.generator``) is shown one chunk at a
time and asked for questions the chunk answers, each with a quote copied from it. A quote that is
not in the chunk (after ``rag_lab.text.normalise_text``: NFKC, case folding, whitespace) — an
invented or paraphrased "quote" — drops its question, as does a reply line that is not a
``{"question", "quote"}`` object. What is kept goes to a review file (JSONL, one candidate per
line, ``status: pending``) that a person marks ``accept``, ``reject`` or ``edit`` (an edited
question or quote; an edited quote is checked again); ``read_review`` turns it into queries
(the quote as ``metadata.evidence``) and qrels (the chunk's document, grade 1), and ``write_split``
writes them as a BEIR split beside the corpus (``queries_<split>.jsonl``, ``qrels/<split>.tsv``):
``rag-lab evaluate dataset.queries=queries_synthetic.jsonl dataset.split=synthetic``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rag_lab.errors import ConfigError, DataError
from rag_lab.generator._helper import PromptedGenerator
from rag_lab.io.files import read_jsonl
from rag_lab.text.language import detect_language
from rag_lab.text.normalise import normalise_text
from rag_lab.types import Chunk, Query

STATUSES = ("pending", "accept", "reject", "edit")

PROMPTS = {
    "en": (
        "You write test questions for a search engine over a document collection.",
        "Passage:\n{passage}\n\nWrite {n} different questions that a user could ask and that this "
        "passage answers. For each, copy the sentence or phrase of the passage that answers it, "
        "character for character. Reply with one JSON object per line and nothing else:\n"
        '{{"question": "...", "quote": "..."}}',
    ),
    "zh": (
        "你为一个文档检索系统编写测试问题。",
        "段落：\n{passage}\n\n写出 {n} 个用户可能提出、并且这段文字能够回答的不同问题。"
        "每个问题都要原样复制段落中回答它的句子或短语（一字不差）。"
        "每行输出一个 JSON 对象，不要输出其他内容：\n"
        '{{"question": "...", "quote": "..."}}',
    ),
}

_OBJECT = re.compile(r"\{.*\}")


@dataclass(frozen=True)
class Candidate:
    """One synthesised question and its evidence quote from chunk ``chunk_id``."""

    id: str
    question: str
    quote: str
    doc_id: str
    chunk_id: str
    passage: str
    status: str = "pending"


@dataclass(frozen=True)
class Synthesis:
    """``kept``: candidates whose quote is in their chunk; the counts say why the others went."""

    kept: tuple[Candidate, ...]
    n_generated: int  # question objects parsed from the replies
    n_quote_not_in_source: int
    n_unparsed_lines: int
    n_chunks: int
    samples_dropped: tuple[dict[str, str], ...] = field(default=())

    @property
    def share_kept(self) -> float:
        return len(self.kept) / self.n_generated if self.n_generated else 0.0


def quote_in(quote: str, passage: str, min_chars: int = 6) -> bool:
    """Whether ``quote`` (at least ``min_chars`` after normalisation) occurs in ``passage``."""
    q = normalise_text(quote)
    return len(q) >= min_chars and q in normalise_text(passage)


def parse_reply(text: str) -> tuple[list[tuple[str, str]], int]:
    """``([(question, quote)], n_unparsed)``: one JSON object per line (code fences, list markers
    and other text around an object are tolerated; a line with no object is not counted)."""
    pairs: list[tuple[str, str]] = []
    bad = 0
    for line in text.splitlines():
        match = _OBJECT.search(line)
        if match is None:
            bad += bool(line.strip()) and line.strip() not in ("```", "```json")
            continue
        try:
            obj = json.loads(match.group(0))
        except ValueError:
            bad += 1
            continue
        question, quote = (
            (obj.get("question"), obj.get("quote")) if isinstance(obj, dict) else ("", "")
        )
        if isinstance(question, str) and isinstance(quote, str) and question.strip():
            pairs.append((question.strip(), quote.strip()))
        else:
            bad += 1
    return pairs, bad


def synthesize(
    chunks: Sequence[Chunk],
    generator: Any,
    per_chunk: int = 2,
    max_chunks: int | None = 50,
    min_chars: int = 80,
    seed: int = 0,
) -> Synthesis:
    """Ask ``generator`` for ``per_chunk`` questions on each of up to ``max_chunks`` chunks (a
    seeded sample of those with at least ``min_chars`` characters), keep those whose quote is in
    the chunk."""
    if not isinstance(generator, PromptedGenerator):
        raise ConfigError(
            f"generator: {type(generator).__name__} writes no text of its own; synthesis needs an "
            "LLM generator (generator=openai or generator=transformers)"
        )
    pool = sorted((c for c in chunks if len(c.text.strip()) >= min_chars), key=lambda c: c.chunk_id)
    if max_chunks is not None and len(pool) > max_chunks:
        pool = sorted(random.Random(seed).sample(pool, max_chunks), key=lambda c: c.chunk_id)
    kept: list[Candidate] = []
    dropped: list[dict[str, str]] = []
    n_generated = n_bad_quote = n_unparsed = 0
    seen: set[str] = set()
    for chunk in pool:
        system, user = PROMPTS[detect_language(chunk.text)]
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": user.format(passage=chunk.text.strip(), n=per_chunk)},
        ]
        pairs, bad = parse_reply(generator.complete(messages))
        n_unparsed += bad
        for question, quote in pairs[:per_chunk]:
            n_generated += 1
            if not quote_in(quote, chunk.text):
                n_bad_quote += 1
                if len(dropped) < 5:
                    dropped.append(
                        {"chunk_id": chunk.chunk_id, "question": question, "quote": quote}
                    )
                continue
            key = normalise_text(question)
            if key in seen:
                continue
            seen.add(key)
            digest = hashlib.sha256(f"{chunk.chunk_id}\0{question}".encode()).hexdigest()[:12]
            kept.append(
                Candidate(
                    f"syn-{digest}", question, quote, chunk.doc_id, chunk.chunk_id, chunk.text
                )
            )
    return Synthesis(tuple(kept), n_generated, n_bad_quote, n_unparsed, len(pool), tuple(dropped))


def write_review(path: Path, candidates: Sequence[Candidate]) -> Path:
    """The review file: one candidate per line, ``status: pending``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for c in candidates:
            fh.write(json.dumps(asdict(c), ensure_ascii=False) + "\n")
    return path


def read_review(
    path: Path, accept_pending: bool = False
) -> tuple[dict[str, Query], dict[str, dict[str, int]]]:
    """Queries and qrels from a reviewed file: ``accept`` and ``edit`` lines are kept (an edited
    quote must still be in the passage), ``reject`` lines dropped; a ``pending`` line is refused
    (naming it) unless ``accept_pending``."""
    queries: dict[str, Query] = {}
    qrels: dict[str, dict[str, int]] = {}
    for lineno, rec in read_jsonl(path):
        where = f"{path}:{lineno}"
        status = rec.get("status")
        if status not in STATUSES:
            raise DataError(f"{where}: status {status!r} (use one of {', '.join(STATUSES)})")
        if status == "pending" and not accept_pending:
            raise DataError(f"{where}: still pending (mark it accept, reject or edit)")
        if status == "reject":
            continue
        for key in ("id", "question", "quote", "doc_id", "passage"):
            if not isinstance(rec.get(key), str) or not rec[key].strip():
                raise DataError(f"{where}: missing or empty {key!r}")
        if not quote_in(rec["quote"], rec["passage"]):
            raise DataError(f"{where}: the quote is not in the passage (edit it to a verbatim one)")
        qid = rec["id"]
        if qid in queries:
            raise DataError(f"{where}: duplicate id {qid!r}")
        meta = {
            "evidence": [rec["quote"]],
            "category": "synthetic",
            "source_chunk": rec.get("chunk_id"),
        }
        queries[qid] = Query(qid, rec["question"], meta)
        qrels[qid] = {rec["doc_id"]: 1}
    if not queries:
        raise DataError(f"{path}: no accepted question")
    return queries, qrels


def write_split(
    dataset_dir: Path, split: str, queries: dict[str, Query], qrels: dict[str, dict[str, int]]
) -> tuple[Path, Path]:
    """``queries_<split>.jsonl`` and ``qrels/<split>.tsv`` in a BEIR folder."""
    qpath = dataset_dir / f"queries_{split}.jsonl"
    rpath = dataset_dir / "qrels" / f"{split}.tsv"
    rpath.parent.mkdir(parents=True, exist_ok=True)
    with open(qpath, "w", encoding="utf-8") as fh:
        for q in queries.values():
            rec = {
                "_id": q.query_id,
                "text": q.text,
                "metadata": dict(q.metadata),
            }
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    with open(rpath, "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, grades in qrels.items():
            for did, grade in grades.items():
                fh.write(f"{qid}\t{did}\t{grade}\n")
    return qpath, rpath
