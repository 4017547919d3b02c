"""Answer metrics: exact match, token F1, containment, context utilisation, and their aggregation
over a set of answers (``aggregate_answers``; the rows come from
``rag_lab.pipeline.answers.score_response``). Refusals are recognised by
``rag_lab.text.refusals``.

English answers use SQuAD's normalisation (lower-case, drop punctuation and articles a/an/the,
collapse whitespace) and bag-of-tokens F1. Chinese answers use CMRC 2018's: tokens are CJK
characters and whole non-CJK words (pre-tokens, ``rag_lab.text.TOKEN``) without punctuation, and
F1 is over the longest common *contiguous* token run, as the CMRC evaluation script computes it.
The language is the gold answer's (``detect_language``). With several gold answers every metric
takes the best one.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rag_lab.text import TOKEN, ContentTerms, TermSupport, normalise_text
from rag_lab.text.language import detect_language

Golds = str | Sequence[str]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = re.compile(r"[^\w\s]|_")
_ASCII_PUNCT = frozenset(string.punctuation)


def answer_tokens(text: str, language: str) -> list[str]:
    """SQuAD tokens (``en``) or CMRC tokens (``zh``), both normalised."""
    text = normalise_text(text)
    if language == "zh":
        return [t for t in TOKEN.findall(text) if not _PUNCT.fullmatch(t)]
    text = "".join(ch for ch in text if ch not in _ASCII_PUNCT)
    return _ARTICLES.sub(" ", text).split()


def exact_match(response: str, golds: Golds) -> float:
    """1.0 when the normalised response equals a normalised gold answer."""
    return max((float(_tokens(response, g) == _tokens(g, g)) for g in _list(golds)), default=0.0)


def token_f1(response: str, golds: Golds) -> float:
    """Best F1 over gold answers (SQuAD bag overlap for English, CMRC longest common run for
    Chinese)."""
    return max((_f1(response, g) for g in _list(golds)), default=0.0)


def answer_contained(response: str, golds: Golds) -> float:
    """1.0 when a gold answer (``normalise_text``) is a substring of the normalised response."""
    text = normalise_text(response)
    return max((float(normalise_text(g) in text) for g in _list(golds) if g.strip()), default=0.0)


def context_utilisation(
    supported_sentences: Sequence[str],
    contexts: Sequence[str],
    min_share: float = 0.5,
    terms: ContentTerms | None = None,
) -> float | None:
    """Share of ``contexts`` the answer uses: a context is used when at least one supported
    sentence has ``>= min_share`` of its content terms supported by that context alone.
    None when there are no contexts."""
    if not contexts:
        return None
    terms = terms or ContentTerms()
    sentence_terms = [t for t in terms.many(list(supported_sentences)) if t]
    used = 0
    for ctx in contexts:
        support = TermSupport(ctx, terms)
        used += any((support.share(t) or 0.0) >= min_share for t in sentence_terms)
    return used / len(contexts)


def _list(golds: Golds) -> list[str]:
    return [golds] if isinstance(golds, str) else list(golds)


def _tokens(text: str, gold: str) -> list[str]:
    return answer_tokens(text, detect_language(gold))


def _f1(response: str, gold: str) -> float:
    pred, ref = _tokens(response, gold), _tokens(gold, gold)
    if not pred or not ref:
        return float(pred == ref)
    common = (
        _longest_common_run(pred, ref)
        if detect_language(gold) == "zh"
        else sum((Counter(pred) & Counter(ref)).values())
    )
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def _longest_common_run(a: list[str], b: list[str]) -> int:
    """Length of the longest common contiguous subsequence (CMRC's ``find_lcs``)."""
    best, prev = 0, [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


# per-answer scores of ``score_response`` rows that ``aggregate_answers`` averages
ANSWER_SCORES = (
    "faithfulness",
    "context_utilisation",
    "context_precision",
    "context_recall",
    "exact_match",
    "f1",
    "contained",
)
# scores only some judges give (ragas, with gold answers): left out when no row has them
JUDGE_SCORES = ("context_precision", "context_recall")


def _mean(values: Iterable[Any]) -> float:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else math.nan


def aggregate_answers(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Aggregates of ``score_response`` rows (the one recipe ``rag-lab evaluate`` and
    ``rag-lab judge`` share; keys without the ``answer/`` prefix).

    - each of ``ANSWER_SCORES``: mean over the rows where it is set (NaN when none is), so a
      missing score never counts as 0; ``context_precision`` / ``context_recall`` only when a row
      has them (the judge scores them);
    - ``n_missing_faithfulness``: rows without a faithfulness score;
    - ``unsupported_fact_rate``: share of the answers whose judge checks facts (the lexical one)
      that state at least one fact (number, date, code, unit, name) the contexts lack or
      contradict; ``faithful_rate``: share judged faithful by the judge's verdict rule (lexical:
      faithfulness >= ``verdict_threshold`` and no unsupported fact). Both only when some row has
      them;
    - refusals: when every row says whether its query is ``answerable`` (evaluate knows it from
      the qrels), ``refusal_rate_unanswerable`` (refusals among unanswerable queries: higher is
      better) and ``wrong_refusal_rate`` (among answerable ones: lower is better); otherwise
      (logged answers) ``refusal_rate`` over all rows.
    """
    rows = list(rows)
    out: dict[str, float] = {}
    for m in ANSWER_SCORES:
        if m in JUDGE_SCORES and not any(m in r for r in rows):
            continue
        out[m] = _mean(r.get(m) for r in rows)
    out["n_missing_faithfulness"] = float(sum(r.get("faithfulness") is None for r in rows))
    for key, name in (
        ("unsupported_facts", "unsupported_fact_rate"),
        ("faithful", "faithful_rate"),
    ):
        if any(r.get(key) is not None for r in rows):
            out[name] = _mean(bool(r[key]) for r in rows if r.get(key) is not None)
    if rows and all("answerable" in r for r in rows):
        out["refusal_rate_unanswerable"] = _mean(r["refusal"] for r in rows if not r["answerable"])
        out["wrong_refusal_rate"] = _mean(r["refusal"] for r in rows if r["answerable"])
    else:
        out["refusal_rate"] = _mean(r["refusal"] for r in rows)
    return out
