"""Faithfulness from a local Hugging Face detector: an NLI cross-encoder, an HHEM-style or
MiniCheck-style claim classifier, or a LettuceDetect-style token classifier
(``rag_lab.judge._detectors``: each family's input format and label mapping), given by folder or
HF id — including a cross-encoder trained here by ``rag-lab train judge``.

Sequence families (``nli``, ``hhem``, ``minicheck``): each answer sentence is a claim, the
concatenated contexts the premise; a sentence is supported when P(support) >= ``threshold``.
The ``token`` family reads the whole answer once and marks its hallucinated tokens; a sentence
is supported when none of its tokens has P(hallucinated) >= ``threshold``
(``details["spans"]`` lists the hallucinated runs).

None ships offline with this project (no NLI or hallucination-detection model is in a pip
package here): what it detects depends on the model you give it. Known limits of the setup
itself: ``nli`` and ``hhem`` truncate the premise to ``max_length`` model tokens (contexts
beyond it are not seen: keep ``evaluation.answer_k`` small or the model's window large;
``minicheck`` reads the contexts in chunks and keeps the best), ``token`` truncates the prompt,
and sequence families judge sentences one by one, so a claim spread over two sentences is judged
in halves.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from rag_lab.judge._detectors import (
    FAMILIES,
    Loaded,
    PairScorer,
    TokenScorer,
    judge_meta,
    load,
    spans,
)
from rag_lab.judge.base import JudgeResult
from rag_lab.models.resolve import resolve_model
from rag_lab.text import split_sentences
from rag_lab.text.refusals import is_refusal, is_refusal_sentence
from rag_lab.validate import choice


def supported_share(probs: Sequence[float], threshold: float) -> float:
    """faithfulness of a response whose claim sentences have these support probabilities."""
    return sum(p >= threshold for p in probs) / len(probs)


class NLIJudge:
    """Args:
        model: folder or HF id of the detector.
        family: ``auto`` | ``nli`` | ``hhem`` | ``minicheck`` | ``token`` (``_detectors``).
        entailment_label: the class that means supported (``token``: hallucinated), by index or
            by name in ``config.id2label`` (case-insensitive); None = the family's default
            (``entailment``; 1 for hhem, minicheck and token).
        threshold: P(support) from which a sentence counts as supported (``token``:
            P(hallucinated) from which a token is hallucinated).
        verdict_threshold: faithfulness from which the answer is judged faithful
            (``details["faithful"]``; 1.0: every sentence supported).
        max_length: model tokens per input; the premise (prompt) is truncated (None: a trained
            judge's own, else 512).
        batch_size: inputs per forward pass; device: torch device.
        prompt: the hhem / token family's template (None: ``HHEM_PROMPT`` / ``TOKEN_PROMPT``).
        chunk_words: the minicheck family's chunk size (words; Chinese: 1.5 characters a word;
            None: a trained judge's own, else 400).
        trust_remote_code: let transformers run the model repository's own code (HHEM-2.1-open
            needs it); off by default.
        retries, backoff: used by ``JudgeRunner`` around each call (a transient device error).

    ``details``: ``refusal``, ``faithful`` (the verdict), ``family``, ``n_claims``,
    ``n_supported``, ``supported_sentences``, ``unsupported`` (``[{sentence, entailment}]``),
    ``entailment`` (P(support) per claim, in order), ``mean_entailment`` (a continuous score);
    ``token``: also ``spans`` (``[{text, start, end, confidence}]``).
    """

    def __init__(
        self,
        model: str,
        family: str = "auto",
        entailment_label: int | str | None = None,
        threshold: float = 0.5,
        verdict_threshold: float = 1.0,
        max_length: int | None = None,
        batch_size: int = 16,
        device: str = "cpu",
        prompt: str | None = None,
        chunk_words: int | None = None,
        trust_remote_code: bool = False,
        retries: int = 0,
        backoff: float = 1.0,
    ) -> None:
        for name, value in (("threshold", threshold), ("verdict_threshold", verdict_threshold)):
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        self.family = choice(family, "family", FAMILIES)
        self.verdict_threshold = float(verdict_threshold)
        self.model_name, self.entailment_label = str(model), entailment_label
        self.threshold, self.batch_size = float(threshold), int(batch_size)
        self._max_length, self._chunk_words = max_length, chunk_words
        self.prompt, self.trust_remote_code = prompt, bool(trust_remote_code)
        self.device, self.retries, self.backoff = device, int(retries), float(backoff)

    @cached_property
    def _path(self) -> str:
        return resolve_model(self.model_name)

    @cached_property
    def _loaded(self) -> Loaded:
        return load(
            self._path,
            self.family,
            self.entailment_label,
            self.device,
            self.trust_remote_code,
        )

    @property
    def max_length(self) -> int:
        """The configured window, else a trained judge's (``rag_lab_judge.json``), else 512."""
        if self._max_length is not None:
            return int(self._max_length)
        return int(judge_meta(self._path).get("max_length", 512))

    @property
    def chunk_words(self) -> int:
        """The configured chunk size, else a trained judge's, else 400 words."""
        if self._chunk_words is not None:
            return int(self._chunk_words)
        return int(judge_meta(self._path).get("chunk_words", 400))

    @cached_property
    def _pairs(self) -> PairScorer:
        return PairScorer(
            self._loaded,
            self.max_length,
            self.batch_size,
            self.device,
            self.prompt,
            self.chunk_words,
        )

    @cached_property
    def _tokens(self) -> TokenScorer:
        return TokenScorer(self._loaded, self.max_length, self.device, self.prompt)

    @property
    def label_index(self) -> int:
        """The supported (token: hallucinated) class's index; -1 for a one-output model."""
        return self._loaded.index

    @property
    def resolved_family(self) -> str:
        return self._loaded.family

    @cached_property
    def identity(self) -> dict[str, Any]:
        from rag_lab.models.resolve import weights_hash

        return {
            "kind": "nli",
            "family": self.resolved_family,
            "model": self.model_name,
            "weights": weights_hash(self._path),
            "label": self.label_index,
            "threshold": self.threshold,
            "verdict_threshold": self.verdict_threshold,
            "max_length": self.max_length,
            "prompt": self.prompt,
            "chunk_words": self.chunk_words if self.resolved_family == "minicheck" else None,
        }

    def entailment(self, premise: str, hypotheses: Sequence[str]) -> list[float]:
        """P(support | premise, hypothesis) for each hypothesis (sequence families)."""
        return self._pairs.support(premise, list(hypotheses))

    def _token_support(
        self, query: str, contexts: Sequence[str], response: str, claims: Sequence[str]
    ) -> tuple[list[float], list[dict[str, Any]]]:
        """1 - the highest P(hallucinated) of each claim's tokens, and the hallucinated runs."""
        tokens = self._tokens.hallucination(query, contexts, response)
        probs, start = [], 0
        for claim in claims:
            at = response.find(claim, start)
            at = start if at < 0 else at
            end, start = at + len(claim), at + len(claim)
            inside = [p for a, b, p in tokens if a < end and b > at]
            probs.append(1.0 - max(inside, default=0.0))
        return probs, spans(tokens, response, self.threshold)

    def judge(
        self, query: str, contexts: Sequence[str], response: str, reference: str | None = None
    ) -> JudgeResult:
        if not response.strip():
            return JudgeResult(None, {"reason": "empty response", "by_rule": True})
        if is_refusal(response):
            return JudgeResult(1.0, {"refusal": True, "faithful": True, "by_rule": True})
        claims = [s for s in split_sentences(response) if not is_refusal_sentence(s)]
        if not claims:
            return JudgeResult(
                None, {"reason": "no claim in the response", "refusal": False, "by_rule": True}
            )
        extra: dict[str, Any] = {}
        if not contexts:
            probs = [0.0] * len(claims)
        elif self.resolved_family == "token":
            probs, extra["spans"] = self._token_support(query, contexts, response, claims)
        else:
            probs = self.entailment("\n".join(contexts), claims)
        if self.resolved_family == "token":
            # supported when no token is hallucinated: every P(hallucinated) < threshold
            ok = [p > 1.0 - self.threshold for p in probs]
        else:
            ok = [p >= self.threshold for p in probs]
        supported = [c for c, good in zip(claims, ok) if good]
        share = sum(ok) / len(ok)
        details: dict[str, Any] = {
            "refusal": False,
            "faithful": share >= self.verdict_threshold,
            "family": self.resolved_family,
            "n_claims": len(claims),
            "n_supported": len(supported),
            "supported_sentences": supported,
            "unsupported": [
                {"sentence": c, "entailment": round(p, 4)}
                for c, p, good in zip(claims, probs, ok)
                if not good
            ],
            "entailment": [round(p, 4) for p in probs],
            "mean_entailment": sum(probs) / len(probs),
            **extra,
        }
        return JudgeResult(share, details)
