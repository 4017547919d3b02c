"""Hugging Face hallucination detectors behind ``NLIJudge``, one class per input format.

Families (``FAMILIES``), each with its input format and label mapping:

- ``nli``: an NLI cross-encoder (DeBERTa / RoBERTa MNLI …): the (premise, hypothesis) pair, the
  premise truncated; P(support) = softmax over the classes at the entailment class (by name in
  ``id2label`` or by index; default ``entailment``).
- ``hhem``: a Vectara HHEM-style classifier: one sequence made from a prompt template
  (``HHEM_PROMPT``, with ``{premise}`` and ``{hypothesis}``), truncated; P(support) = softmax at
  the consistent class (default 1). HHEM-2.1-open itself is a T5 with its own code: load it with
  ``trust_remote_code: true``.
- ``minicheck``: a MiniCheck-style claim checker (RoBERTa / DeBERTa MiniCheck, and the
  cross-encoders ``rag-lab train judge`` writes): (document chunk, claim) pairs, the document cut
  into chunks of ``chunk_words`` words (Chinese: characters) so that none is truncated away;
  P(support) = the highest over the chunks of softmax at the supported class (default 1). A
  model with one output is read through a sigmoid (P(support) = sigmoid(logit)), whatever the
  family.
- ``token``: a LettuceDetect-style token classifier (ModernBERT …): (prompt with the question and
  the numbered passages, ``TOKEN_PROMPT``; the answer), the prompt truncated; each answer token's
  P(hallucinated) = softmax at the hallucinated class (default 1); a claim's P(support) = 1 - the
  highest P(hallucinated) of its tokens.

``family: auto`` reads the model folder's ``rag_lab_judge.json`` (written by ``rag-lab train
judge``), else takes ``token`` for a ``*ForTokenClassification`` architecture, ``nli`` when a class
name holds "entail", ``hhem`` for an HHEM model type; otherwise it asks for the family.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_lab.errors import ConfigError
from rag_lab.models.resolve import JUDGE_META
from rag_lab.text.patterns import has_cjk

FAMILIES = ("auto", "nli", "hhem", "minicheck", "token")
# the class that means "supported" (token: "hallucinated") when the config does not name one
DEFAULT_LABELS: dict[str, int | str] = {"nli": "entailment", "hhem": 1, "minicheck": 1, "token": 1}
HHEM_PROMPT = (
    "<pad> Determine if the hypothesis is true given the premise?\n\n"
    "Premise: {premise}\n\nHypothesis: {hypothesis}"
)
# LettuceDetect's RAGTruth question-answering prompt (its training format)
TOKEN_PROMPT = (
    "\nBriefly answer the following question:\n{question}\nBear in mind that your response "
    "should be strictly based on the following {num_passages} passages:\n{context}\nIn case "
    "the passages do not contain the necessary information to answer the question, please reply "
    'with: "Unable to answer based on given passages."\noutput:\n'
)


def judge_meta(model: str) -> dict[str, Any]:
    """A trained judge's ``rag_lab_judge.json`` (family, max_length, chunk_words); {} without."""
    meta = Path(model) / JUDGE_META
    if not meta.is_file():
        return {}
    data = json.loads(meta.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def read_family(model: str, config: Any) -> str:
    """The family of a model (rules: module docstring); ``ConfigError`` when it cannot tell."""
    family = str(judge_meta(model).get("family", ""))
    if family in FAMILIES[1:]:
        return family
    architectures = [str(a) for a in (getattr(config, "architectures", None) or [])]
    if any(a.endswith("ForTokenClassification") for a in architectures):
        return "token"
    labels = {str(v).lower() for v in (getattr(config, "id2label", None) or {}).values()}
    if any("entail" in label for label in labels):
        return "nli"
    kind = str(getattr(config, "model_type", "")).lower()
    if "hhem" in kind or any("hhem" in a.lower() for a in architectures):
        return "hhem"
    raise ConfigError(
        f"judge.family=auto cannot tell what kind of detector {model} is (architectures "
        f"{architectures or '?'}, labels {sorted(labels) or '?'}): set judge.family to one of "
        f"{', '.join(FAMILIES[1:])}"
    )


def label_index(id2label: dict[Any, Any], want: int | str, model: str, what: str) -> int:
    """The index of class ``want`` (an index, or a name in ``id2label``, case-insensitive)."""
    labels = {int(i): str(n) for i, n in id2label.items()}
    if isinstance(want, int) or str(want).isdigit():
        if int(want) in labels:
            return int(want)
    else:
        found = [i for i, n in labels.items() if n.lower() == str(want).lower()]
        if found:
            return found[0]
    raise ConfigError(
        f"judge.entailment_label={want!r} is not a class of {model} (its labels: {labels}); "
        f"give the index or name of the {what} class"
    )


def chunk_document(text: str, words: int) -> list[str]:
    """``text`` in consecutive chunks of about ``words`` words (Chinese text: 1.5 characters a
    word), cut at sentence ends where one falls in the last quarter of a chunk."""
    if has_cjk(text):
        size = int(words * 1.5)
        out, start = [], 0
        while start < len(text):
            end = min(len(text), start + size)
            cut = max(text.rfind(p, start, end) for p in "。！？；\n")
            if end < len(text) and cut >= start + size * 3 // 4:
                end = cut + 1
            out.append(text[start:end])
            start = end
        return [c for c in out if c.strip()] or [text]
    tokens = text.split()
    return [" ".join(tokens[i : i + words]) for i in range(0, len(tokens), words)] or [text]


@dataclass
class Loaded:
    tokenizer: Any
    model: Any
    family: str
    index: int  # the supported class (token: the hallucinated class); -1: one output (sigmoid)


def load(
    model: str, family: str, label: int | str | None, device: str, trust_remote_code: bool
) -> Loaded:
    """Tokenizer and model of ``family`` (``auto`` resolved), on ``device``, in eval mode."""
    from transformers import (
        AutoConfig,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
        AutoTokenizer,
    )

    try:
        config = AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code)
        family = read_family(model, config) if family == "auto" else family
        head: Any = AutoModelForSequenceClassification
        if family == "token":
            head = AutoModelForTokenClassification
        tok = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
        net = head.from_pretrained(model, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot load NLI model {model}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        ) from None
    net.to(device).eval()
    n_labels = int(getattr(net.config, "num_labels", 0) or len(net.config.id2label))
    want = DEFAULT_LABELS[family] if label is None else label
    what = "hallucinated" if family == "token" else "supported (entailment)"
    index = -1 if n_labels == 1 else label_index(net.config.id2label, want, model, what)
    return Loaded(tok, net, family, index)


class PairScorer:
    """P(support) of claims against a premise for the sequence families (nli, hhem,
    minicheck)."""

    def __init__(
        self,
        loaded: Loaded,
        max_length: int,
        batch_size: int,
        device: str,
        prompt: str | None = None,
        chunk_words: int = 400,
    ) -> None:
        self.loaded, self.max_length, self.batch_size = loaded, max_length, batch_size
        self.device, self.chunk_words = device, chunk_words
        self.prompt = prompt or HHEM_PROMPT
        self._lock = threading.Lock()

    def inputs(self, premise: str, claims: Sequence[str]) -> list[tuple[str, ...]]:
        """The texts the model reads for each claim, in order (minicheck: one per chunk; the
        chunks of claim ``i`` are rows ``i * n_chunks ...``)."""
        family = self.loaded.family
        if family == "hhem":
            return [(self.prompt.format(premise=premise, hypothesis=c),) for c in claims]
        if family == "minicheck":
            chunks = chunk_document(premise, self.chunk_words)
            return [(chunk, c) for c in claims for chunk in chunks]
        return [(premise, c) for c in claims]

    def _probs(self, rows: Sequence[tuple[str, ...]]) -> list[float]:
        import torch

        tok, net, idx = self.loaded.tokenizer, self.loaded.model, self.loaded.index
        out: list[float] = []
        for i in range(0, len(rows), self.batch_size):
            batch = rows[i : i + self.batch_size]
            args: list[list[str]] = [[r[0] for r in batch]]
            if len(batch[0]) > 1:
                args.append([r[1] for r in batch])
            enc = tok(
                *args,
                truncation="only_first" if len(args) > 1 else True,
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            ).to(self.device)
            with torch.inference_mode():
                logits = net(**enc).logits.float()
            probs = logits[:, 0].sigmoid() if idx < 0 else logits.softmax(-1)[:, idx]
            out.extend(float(p) for p in probs)
        return out

    def support(self, premise: str, claims: Sequence[str]) -> list[float]:
        rows = self.inputs(premise, claims)
        with self._lock:
            probs = self._probs(rows)
        per = len(rows) // max(len(claims), 1)
        return [max(probs[k * per : (k + 1) * per]) for k in range(len(claims))]


class TokenScorer:
    """Per answer token P(hallucinated), for the token family."""

    def __init__(self, loaded: Loaded, max_length: int, device: str, prompt: str | None = None):
        self.loaded, self.max_length, self.device = loaded, max_length, device
        self.prompt = prompt or TOKEN_PROMPT
        self._lock = threading.Lock()

    def format(self, question: str, contexts: Sequence[str]) -> str:
        passages = "\n".join(f"passage {i}: {c}" for i, c in enumerate(contexts, 1))
        return self.prompt.format(question=question, num_passages=len(contexts), context=passages)

    def hallucination(
        self, question: str, contexts: Sequence[str], response: str
    ) -> list[tuple[int, int, float]]:
        """``(start, end, P(hallucinated))`` of each answer token, offsets into ``response``."""
        import torch

        tok, net, idx = self.loaded.tokenizer, self.loaded.model, self.loaded.index
        enc = tok(
            self.format(question, contexts),
            response,
            truncation="only_first",
            max_length=self.max_length,
            return_offsets_mapping=True,
            return_tensors="pt",
        )
        offsets = enc.pop("offset_mapping")[0].tolist()
        sequence = enc.sequence_ids(0)
        with self._lock, torch.inference_mode():
            logits = net(**enc.to(self.device)).logits[0].float()
        probs = logits[:, 0].sigmoid() if idx < 0 else logits.softmax(-1)[:, idx]
        return [
            (int(a), int(b), float(p))
            for (a, b), seq, p in zip(offsets, sequence, probs.tolist())
            if seq == 1 and b > a
        ]


def spans(
    tokens: Sequence[tuple[int, int, float]], response: str, threshold: float
) -> list[dict[str, Any]]:
    """Runs of answer tokens with P(hallucinated) >= ``threshold`` as ``{text, start, end,
    confidence}`` (the highest P in the run)."""
    out: list[dict[str, Any]] = []
    for a, b, p in tokens:
        if p < threshold:
            continue
        if out and not response[out[-1]["end"] : a].strip():  # the next word of the run
            out[-1]["end"], out[-1]["confidence"] = b, max(out[-1]["confidence"], p)
        else:
            out.append({"start": a, "end": b, "confidence": p})
    for s in out:
        s["text"] = response[s["start"] : s["end"]]
        s["confidence"] = round(s["confidence"], 4)
    return out
