"""Faithfulness from a local NLI cross-encoder: each answer sentence is a hypothesis, the
concatenated contexts the premise; a sentence is supported when P(entailment) >= ``threshold``.

Works with any sequence-classification NLI model given as a folder or HF id (e.g. a DeBERTa /
RoBERTa MNLI model a user has locally); none ships offline with this project. What it can and
cannot detect depends on the model. Known limits of the setup itself: the premise is truncated to
``max_length`` model tokens (contexts beyond it are not seen: keep ``evaluation.answer_k`` small or
the model's window large), and sentences are judged one by one, so a claim spread over two
sentences is judged in halves.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from rag_lab.errors import ConfigError
from rag_lab.judge.base import JudgeResult
from rag_lab.text import split_sentences
from rag_lab.text.refusals import is_refusal, is_refusal_sentence


def supported_share(probs: Sequence[float], threshold: float) -> float:
    """faithfulness of a response whose claim sentences have these entailment probabilities."""
    return sum(p >= threshold for p in probs) / len(probs)


class NLIJudge:
    """Args:
        model: folder or HF id of a sequence-classification NLI model.
        entailment_label: the entailment class, by index (``2``) or by name as in the model's
            ``config.id2label`` (``"entailment"``, case-insensitive).
        threshold: P(entailment) from which a sentence counts as supported.
        verdict_threshold: faithfulness from which the answer is judged faithful
            (``details["faithful"]``; 1.0: every sentence entailed).
        max_length: model tokens per (premise, sentence) pair; the premise is truncated.
        batch_size: pairs per forward pass; device: torch device.
        retries, backoff: used by ``JudgeRunner`` around each call (a transient device error).

    ``details``: ``refusal``, ``faithful`` (the verdict), ``n_claims``, ``n_supported``,
    ``supported_sentences``, ``unsupported`` (``[{sentence, entailment}]``), ``entailment`` (per
    claim, in order), ``mean_entailment`` (a continuous score).
    """

    def __init__(
        self,
        model: str,
        entailment_label: int | str = "entailment",
        threshold: float = 0.5,
        verdict_threshold: float = 1.0,
        max_length: int = 512,
        batch_size: int = 16,
        device: str = "cpu",
        retries: int = 0,
        backoff: float = 1.0,
    ) -> None:
        for name, value in (("threshold", threshold), ("verdict_threshold", verdict_threshold)):
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        self.verdict_threshold = float(verdict_threshold)
        self.model_name, self.entailment_label = str(model), entailment_label
        self.threshold, self.max_length = float(threshold), int(max_length)
        self.batch_size = int(batch_size)
        self.device, self.retries, self.backoff = device, int(retries), float(backoff)
        self._lock = threading.Lock()

    @cached_property
    def _loaded(self) -> tuple[Any, Any, int]:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        with self._lock:
            try:
                tok = AutoTokenizer.from_pretrained(self.model_name)
                model = AutoModelForSequenceClassification.from_pretrained(self.model_name)
            except (OSError, ValueError) as exc:
                raise ConfigError(
                    f"cannot load NLI model {self.model_name}: {type(exc).__name__}: "
                    f"{str(exc).splitlines()[0][:300]}"
                ) from None
            model.to(self.device).eval()
            return tok, model, self._label_index(model.config.id2label)

    def _label_index(self, id2label: dict[int, str]) -> int:
        labels = {int(i): str(n) for i, n in id2label.items()}
        want = self.entailment_label
        if isinstance(want, int) or str(want).isdigit():
            if int(want) in labels:
                return int(want)
        else:
            found = [i for i, n in labels.items() if n.lower() == str(want).lower()]
            if found:
                return found[0]
        raise ConfigError(
            f"judge.entailment_label={want!r} is not a class of {self.model_name} "
            f"(its labels: {labels}); give the index or name of the entailment class"
        )

    @property
    def label_index(self) -> int:
        return self._loaded[2]

    @cached_property
    def identity(self) -> dict[str, Any]:
        from rag_lab.models.resolve import weights_hash

        return {
            "kind": "nli",
            "model": self.model_name,
            "weights": weights_hash(self.model_name),
            "label": self.label_index,
            "threshold": self.threshold,
            "verdict_threshold": self.verdict_threshold,
            "max_length": self.max_length,
        }

    def entailment(self, premise: str, hypotheses: Sequence[str]) -> list[float]:
        """P(entailment | premise, hypothesis) for each hypothesis."""
        import torch

        tok, model, idx = self._loaded
        out: list[float] = []
        for i in range(0, len(hypotheses), self.batch_size):
            batch = list(hypotheses[i : i + self.batch_size])
            enc = tok(
                [premise] * len(batch),
                batch,
                truncation="only_first",
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            ).to(self.device)
            with torch.inference_mode():
                probs = model(**enc).logits.float().softmax(-1)[:, idx]
            out.extend(float(p) for p in probs)
        return out

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
        probs = self.entailment("\n".join(contexts), claims) if contexts else [0.0] * len(claims)
        supported = [c for c, p in zip(claims, probs) if p >= self.threshold]
        share = supported_share(probs, self.threshold)
        details: dict[str, Any] = {
            "refusal": False,
            "faithful": share >= self.verdict_threshold,
            "n_claims": len(claims),
            "n_supported": len(supported),
            "supported_sentences": supported,
            "unsupported": [
                {"sentence": c, "entailment": round(p, 4)}
                for c, p in zip(claims, probs)
                if p < self.threshold
            ],
            "entailment": [round(p, 4) for p in probs],
            "mean_entailment": sum(probs) / len(probs),
        }
        return JudgeResult(share, details)
