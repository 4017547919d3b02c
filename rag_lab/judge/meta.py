"""Meta-evaluation of faithfulness judges on labelled (response, context) pairs.

Pairs are built from an extractive QA set (CMRC 2018 in BEIR layout: a query's gold answers in
``metadata.answers``, its paragraph in the qrels):

- faithful: the gold answer as a sentence, with its own paragraph;
- unfaithful ``wrong_context``: the same answer with another random paragraph that does not
  contain it;
- unfaithful ``changed_number``: for answers with digits, one digit changed (so that the new
  answer is not in the paragraph), with its own paragraph.

Half the pairs are faithful; the other half splits evenly between the two unfaithful kinds.
The set is easy by construction (answers are verbatim spans); it checks that a judge catches the
two failures it should catch, not that it is a good judge of free-form answers.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rag_lab.text import normalise_text

_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Pair:
    query: str
    context: str
    response: str
    faithful: bool
    kind: str  # faithful | wrong_context | changed_number


def auroc(labels: Sequence[bool] | np.ndarray, scores: Sequence[float] | np.ndarray) -> float:
    """Area under the ROC curve via the Mann-Whitney U statistic with average ranks for ties
    (ties between a positive and a negative count one half). Needs both classes."""
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=float)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("auroc needs at least one positive and one negative")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    ranks[order] = np.arange(1, len(s) + 1)
    # average the ranks of tied scores
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    ranks = (sums / counts)[inverse]
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def as_sentence(answer: str) -> str:
    answer = answer.strip()
    return answer if answer.endswith(("。", ".", "！", "？")) else answer + "。"


def change_number(answer: str, context: str, rng: random.Random, tries: int = 10) -> str | None:
    """``answer`` with one digit replaced so that the result does not occur in ``context``."""
    positions = [m.start() for m in _DIGIT.finditer(answer)]
    norm_ctx = normalise_text(context)
    for _ in range(tries if positions else 0):
        i = rng.choice(positions)
        new = str((int(answer[i]) + rng.randint(1, 9)) % 10)
        out = answer[:i] + new + answer[i + 1 :]
        if normalise_text(out) not in norm_ctx:
            return out
    return None


def build_pairs(
    paragraphs: Mapping[str, str], items: Sequence[tuple[str, str, str]], n: int, seed: int = 0
) -> list[Pair]:
    """``n`` pairs (half faithful) from ``items`` = ``(query, answer, paragraph id)``."""
    rng = random.Random(seed)
    items = list(items)
    rng.shuffle(items)
    ids = sorted(paragraphs)
    n_pos, n_wrong = n // 2, (n - n // 2) // 2
    n_num = n - n_pos - n_wrong
    pos: list[Pair] = []
    wrong: list[Pair] = []
    num: list[Pair] = []
    for q, ans, pid in items:
        ctx = paragraphs[pid]
        if len(pos) < n_pos:
            pos.append(Pair(q, ctx, as_sentence(ans), True, "faithful"))
            continue
        if len(wrong) < n_wrong:
            other = paragraphs[rng.choice(ids)]
            if normalise_text(ans) not in normalise_text(other):
                wrong.append(Pair(q, other, as_sentence(ans), False, "wrong_context"))
                continue
        if len(num) < n_num and (changed := change_number(ans, ctx, rng)) is not None:
            num.append(Pair(q, ctx, as_sentence(changed), False, "changed_number"))
        if len(pos) + len(wrong) + len(num) == n:
            break
    return pos + wrong + num
