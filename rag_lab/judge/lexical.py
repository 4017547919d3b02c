"""Offline, deterministic faithfulness judge from word overlap and exact facts.

A response is split into sentences (``rag_lab.text.split_sentences``). A sentence is *supported*
when (a) at least ``support_threshold`` of its content terms (jieba, lower-cased, stopwords and
punctuation dropped, English stemmed; ``rag_lab.text``) occur in the contexts, and (b) every
number (with its unit), fault / model code and clause id in it occurs in the contexts
(``rag_lab.judge.facts``). faithfulness = supported sentences / sentences that make a claim.
A response made only of refusal strings scores 1.0 with ``details["refusal"] = True``; refusal
sentences inside a longer answer are not counted as claims. An empty response is a missing score.

What it cannot detect — treat a high score as "no lexical evidence of hallucination", not as
"faithful":
- paraphrased contradictions ("the valve must stay open" vs a context saying it must be closed,
  when "open" occurs elsewhere in the contexts);
- negation or polarity flips that reuse the context's words ("do not reset" vs "reset"; one extra
  "not" costs one term, often not enough to cross the threshold);
- wrong relations between correct entities (E102 attributed to the cause of E103, a value of one
  model given for another, swapped numbers: every item occurs in the contexts; a number without a
  unit only has to occur somewhere in the contexts);
- answers from the model's own knowledge phrased with words that happen to occur in the contexts;
- facts written differently from the context (三千 vs 3000, unit conversions, "E-102" vs "E102"
  is tolerated but "2.50" vs "2.5" is not), which it reports as unsupported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_lab.judge.base import JudgeResult
from rag_lab.judge.facts import extract_facts, normalise_facts_text
from rag_lab.metrics.answers import is_refusal, is_refusal_sentence
from rag_lab.text import ContentTerms, TermSupport, split_sentences
from rag_lab.tokenizer.base import Tokenizer


class LexicalJudge:
    """Args:
        support_threshold: share of a sentence's content terms the contexts must contain.
        tokenizer: term analysis (default jieba exact mode; see ``rag_lab.text.ContentTerms``).

    ``details``: ``refusal``, ``n_claims``, ``n_supported``, ``supported_sentences``,
    ``unsupported`` (``[{sentence, support, missing}]``), ``missing`` (all missing facts, in
    order), ``mean_support`` (mean term support over claims, a continuous score).
    """

    def __init__(self, support_threshold: float = 0.6, tokenizer: Tokenizer | None = None) -> None:
        if not 0.0 < support_threshold <= 1.0:
            raise ValueError(f"support_threshold must be in (0, 1], got {support_threshold}")
        self.support_threshold = support_threshold
        self.terms = ContentTerms(tokenizer)

    def judge(
        self, query: str, contexts: Sequence[str], response: str, reference: str | None = None
    ) -> JudgeResult:
        if not response.strip():
            return JudgeResult(None, {"reason": "empty response"})
        if is_refusal(response):
            return JudgeResult(1.0, {"refusal": True})
        claims = [s for s in split_sentences(response) if not is_refusal_sentence(s)]
        joined = "\n".join(contexts)
        support, facts_text = TermSupport(joined, self.terms), normalise_facts_text(joined)
        checked = (
            self._check(s, terms, support, facts_text)
            for s, terms in zip(claims, self.terms.many(claims))
        )
        rows = [r for r in checked if r is not None]
        if not rows:
            return JudgeResult(None, {"reason": "no claim in the response", "refusal": False})
        supported = [r["sentence"] for r in rows if r["ok"]]
        details: dict[str, Any] = {
            "refusal": False,
            "n_claims": len(rows),
            "n_supported": len(supported),
            "supported_sentences": supported,
            "unsupported": [
                {k: r[k] for k in ("sentence", "support", "missing")} for r in rows if not r["ok"]
            ],
            "missing": list(dict.fromkeys(m for r in rows for m in r["missing"])),
            "mean_support": sum(r["support"] for r in rows) / len(rows),
        }
        return JudgeResult(len(supported) / len(rows), details)

    def _check(
        self, sentence: str, terms: list[str], support: TermSupport, facts_text: str
    ) -> dict[str, Any] | None:
        """One sentence's verdict; None for a sentence with neither terms nor facts (no claim)."""
        facts = extract_facts(sentence)
        if not terms and not facts:
            return None
        missing = [f.text for f in facts if not f.found_in(facts_text)]
        # a term inside a fact found in the contexts is supported: "兆帕" of "8兆帕" when the
        # context says "8 MPa", "hx200" when it says "HX-200" (facts have their own, stricter
        # rule)
        found = " ".join(f.text.replace(" ", "") for f in facts if f.text not in missing)
        share = (
            sum(support.supported(t) or t in found for t in terms) / len(terms) if terms else 1.0
        )
        # a missing fact also zeroes the continuous score: the sentence states something false
        score = 0.0 if missing else share
        return {
            "sentence": sentence,
            "support": round(score, 4),
            "missing": missing,
            "ok": share >= self.support_threshold and not missing,
        }
