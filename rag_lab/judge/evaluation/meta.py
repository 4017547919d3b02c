"""Meta-evaluation of faithfulness judges on labelled (response, context) pairs.

Two sources of pairs:

1. The shipped suites ``datasets/judge_meta/{en,zh}.jsonl`` (``suite_pairs`` builds them from the
   hand-written ``datasets/judge_meta/seeds.jsonl``; ``scripts/make_judge_meta.py`` writes them).
   Each seed is a passage, a query and a multi-sentence answer written from the passage (not
   copied from it), with hand-chosen edits. Kinds (``KINDS``): ``faithful`` (the answer with its
   passage), and unfaithful ``wrong_context`` (the answer with the other passage of its topic
   group, which shares many words), ``changed_number`` / ``changed_code`` / ``changed_unit`` /
   ``changed_date`` (one edit of that kind), ``swapped_entity`` (one name replaced by a name the
   passage does not contain), ``added_sentence`` (a plausible sentence from outside the passage
   appended). Seeds carry ``split``: ``dev`` (tune on it) or ``test`` (report it; never tuned on).
   The second suites ``datasets/judge_meta/v2/{en,zh}.jsonl`` (issue 33; ``suite_pairs_v2``
   builds them from ``datasets/judge_meta/v2/seeds.jsonl``): passages from third-party text
   (SciFact abstracts, CMRC 2018 paragraphs: ``source`` names the document) and procedures
   written here, answers written from them (paraphrased, some restating the question's facts:
   ``tags``). Kinds (``KINDS_V2``): ``faithful``, ``wrong_context`` (the other passage of its
   group, another article), ``changed_value`` (a number, date or unit of the answer replaced by
   another value that the passage states *for something else*), ``swapped_entity`` (a named
   entity replaced by one the passage lacks), ``invented_step`` (an instruction the passage does
   not give, inserted after the answer's first sentence) and ``added_sentence`` (a sentence from
   outside the passage appended). Its seeds may also be ``reserve``: written and committed for
   the next round's single held-out measurement, built into the suites but judged by nothing
   (the benchmark and the tests read ``dev`` and ``test`` only).
2. ``build_pairs`` from an extractive QA set (CMRC 2018 in BEIR layout: a query's gold answers in
   ``metadata.answers``, its paragraph in the qrels): faithful (the gold answer as a sentence, with
   its own paragraph), ``wrong_context`` (another random paragraph that does not contain it),
   ``changed_number`` (one digit changed so the answer is not in the paragraph). Half the pairs
   are faithful. Easy by construction (single-span verbatim answers).

``evaluate_judge`` scores a judge on pairs: accuracy of its verdict (``details["faithful"]`` when
the judge gives one, else faithfulness >= ``threshold``) overall and per kind, and AUROC of its
faithfulness and of its continuous scores, overall and per unfaithful kind (that kind's pairs
against all faithful ones).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.text import normalise_text, split_sentences

if TYPE_CHECKING:
    from rag_lab.judge.base import Judge

# kinds of the shipped suites, in report order; every kind but the first is unfaithful
KINDS = (
    "faithful",
    "wrong_context",
    "changed_number",
    "changed_code",
    "changed_unit",
    "changed_date",
    "swapped_entity",
    "added_sentence",
)
# kinds of the second suites (datasets/judge_meta/v2), in report order
KINDS_V2 = (
    "faithful",
    "wrong_context",
    "changed_value",
    "swapped_entity",
    "invented_step",
    "added_sentence",
)
_EDIT_KINDS = {
    "number": "changed_number",
    "code": "changed_code",
    "unit": "changed_unit",
    "date": "changed_date",
    "entity": "swapped_entity",
}

_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Pair:
    query: str
    context: str
    response: str
    faithful: bool
    kind: str  # one of KINDS
    seed: str = ""  # the seed id (shipped suites)
    lang: str = ""
    split: str = ""  # dev | test (shipped suites)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


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


def read_seeds(path: Path) -> list[dict[str, Any]]:
    """The hand-written seeds (one JSON object a line)."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _with_other_passage(
    seeds: Sequence[Mapping[str, Any]],
) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """Each seed with the next seed of its (language, group): the passage its wrong-passage pair
    reads. ValueError naming the seed when its group has no other passage."""
    by_group: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for s in seeds:
        by_group.setdefault((s["lang"], s["group"]), []).append(s)
    for s in seeds:
        group = by_group[(s["lang"], s["group"])]
        if len(group) < 2:
            raise ValueError(f"seed {s['id']}: group {s['group']!r} has no other passage")
        yield s, group[(group.index(s) + 1) % len(group)]


def suite_pairs(seeds: Sequence[Mapping[str, Any]]) -> list[Pair]:
    """All pairs of the shipped suites, in seed order then ``KINDS`` order (deterministic).
    Raises ValueError naming the seed when an edit does not apply (its old text is not in the
    answer, or its new text is already in the passage as a whole word) or a seed's group has no
    other passage."""
    pairs: list[Pair] = []
    for s, other in _with_other_passage(seeds):

        def pair(context: str, response: str, kind: str, s: Mapping[str, Any] = s) -> Pair:
            return Pair(
                s["query"],
                context,
                response,
                kind == "faithful",
                kind,
                s["id"],
                s["lang"],
                s["split"],
            )

        passage, answer = s["passage"], s["answer"]
        norm_passage = normalise_text(passage)
        pairs.append(pair(passage, answer, "faithful"))
        pairs.append(pair(other["passage"], answer, "wrong_context"))
        for edit, kind in _EDIT_KINDS.items():
            for old, new in s["edits"].get(edit, []):
                if old not in answer:
                    raise ValueError(f"seed {s['id']}: {edit} edit {old!r} is not in the answer")
                if re.search(rf"(?<!\w){re.escape(normalise_text(new))}(?!\w)", norm_passage):
                    raise ValueError(f"seed {s['id']}: {edit} edit {new!r} is in the passage")
                pairs.append(pair(passage, answer.replace(old, new, 1), kind))
        sep = "" if s["lang"] == "zh" else " "
        pairs.append(pair(passage, answer + sep + s["outside"], "added_sentence"))
    return pairs


def _stated_in(text: str, norm_passage: str) -> bool:
    """Whether ``text`` occurs in the normalised passage, not inside a longer Latin word or
    number (thousands separators ignored on both sides): "200年前" is in "大约200年前", "200" is
    not in "2000"."""
    needle = _THOUSANDS.sub("", normalise_text(text))
    pattern = rf"(?<![0-9a-z.]){re.escape(needle)}(?![0-9a-z]|\.\d)"
    return re.search(pattern, norm_passage) is not None


_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def suite_pairs_v2(seeds: Sequence[Mapping[str, Any]]) -> list[Pair]:
    """All pairs of the second suites, in seed order then ``KINDS_V2`` order (deterministic).
    Each seed: ``id``, ``lang``, ``group``, ``split``, ``source``, ``query``, ``passage``,
    ``answer`` (several sentences), ``value`` (``[old, new]`` or ``[old, new, evidence]``:
    ``old`` in the answer, ``new`` a value the passage states for something else, as it is
    written there or as ``evidence``, the passage's own wording of it), ``entity`` (``[old,
    new]``: ``new`` not in the passage), ``step`` (an instruction the passage does not give)
    and ``outside`` (a sentence it does not support). Raises ValueError naming the seed when an
    edit does not apply or a group has no other passage."""
    pairs: list[Pair] = []
    for s, other in _with_other_passage(seeds):
        passage, answer, sid = s["passage"], s["answer"], s["id"]
        norm_passage = _THOUSANDS.sub("", normalise_text(passage))
        sentences = split_sentences(answer)
        if len(sentences) < 2:
            raise ValueError(f"seed {sid}: the answer needs two sentences or more")
        old, new, *evidence = s["value"]
        e_old, e_new = s["entity"]
        if old not in answer or old == new:
            raise ValueError(f"seed {sid}: value edit {old!r} is not in the answer")
        if not _stated_in(evidence[0] if evidence else new, norm_passage):
            raise ValueError(f"seed {sid}: value edit {new!r} is not stated in the passage")
        if e_old not in answer:
            raise ValueError(f"seed {sid}: entity edit {e_old!r} is not in the answer")
        if _stated_in(e_new, norm_passage):
            raise ValueError(f"seed {sid}: entity edit {e_new!r} is in the passage")
        sep = "" if s["lang"] == "zh" else " "
        first = answer.index(sentences[0]) + len(sentences[0])
        stepped = answer[:first] + sep + s["step"] + answer[first:]
        texts = {
            "faithful": (passage, answer),
            "wrong_context": (other["passage"], answer),
            "changed_value": (passage, answer.replace(old, new, 1)),
            "swapped_entity": (passage, answer.replace(e_old, e_new, 1)),
            "invented_step": (passage, stepped),
            "added_sentence": (passage, answer + sep + s["outside"]),
        }
        for kind in KINDS_V2:
            context, response = texts[kind]
            pairs.append(
                Pair(
                    s["query"],
                    context,
                    response,
                    kind == "faithful",
                    kind,
                    sid,
                    s["lang"],
                    s["split"],
                )
            )
    return pairs


def read_pairs(paths: Iterable[Path]) -> list[Pair]:
    """Pairs written by ``scripts/make_judge_meta.py`` (``Pair.to_json`` lines)."""
    out: list[Pair] = []
    for path in paths:
        with path.open(encoding="utf-8") as f:
            out.extend(Pair(**json.loads(line)) for line in f if line.strip())
    return out


@dataclass(frozen=True)
class Judged:
    """One pair's outcome: ``faithfulness`` (0 when missing), ``verdict`` (judged faithful),
    continuous ``scores`` by name (for AUROC)."""

    pair: Pair
    faithfulness: float
    verdict: bool
    scores: dict[str, float]
    details: dict[str, Any]


def judge_pairs(pairs: Sequence[Pair], judge: Judge, threshold: float) -> list[Judged]:
    """Run ``judge`` on every pair. The verdict is the judge's own (``details["faithful"]``) when
    it gives one, else faithfulness >= ``threshold``. Scores: ``faithfulness``; ``decisive``
    (faithfulness, 0 when the judge found an unsupported fact); and the judge's continuous score
    when it reports one (``mean_support``, ``mean_entailment``)."""
    out = []
    for p in pairs:
        res = judge.judge(p.query, [p.context], p.response)
        f = 0.0 if res.faithfulness is None else float(res.faithfulness)
        d = dict(res.details)
        verdict = bool(d["faithful"]) if d.get("faithful") is not None else f >= threshold
        scores = {"faithfulness": f, "decisive": 0.0 if d.get("unsupported_facts") else f}
        for key in ("mean_support", "mean_entailment"):
            if key in d:
                scores[key] = float(d[key])
        out.append(Judged(p, f, verdict, scores, d))
    return out


def summarise(judged: Sequence[Judged]) -> dict[str, Any]:
    """Accuracy of the verdicts overall and per kind, AUROC of every score (None when a class is
    absent), and per kind the mean faithfulness and the pairs judged wrongly (seed ids)."""
    y = np.array([j.pair.faithful for j in judged])
    ok = np.array([j.verdict == j.pair.faithful for j in judged])
    out: dict[str, Any] = {
        "n_pairs": len(judged),
        "n_faithful": int(y.sum()),
        "accuracy": float(ok.mean()) if len(ok) else float("nan"),
        "auroc": {},
        "by_kind": {},
    }
    for name in judged[0].scores if judged else ():
        s = np.array([j.scores[name] for j in judged])
        out["auroc"][name] = auroc(y, s) if 0 < y.sum() < len(y) else None
    kinds = [k for k in dict.fromkeys(KINDS + KINDS_V2) if any(j.pair.kind == k for j in judged)]
    kinds += sorted({j.pair.kind for j in judged} - set(kinds))
    faithful = [j for j in judged if j.pair.faithful]
    for kind in kinds:
        rows = [j for j in judged if j.pair.kind == kind]
        out["by_kind"][kind] = {
            "n": len(rows),
            "accuracy": sum(j.verdict == j.pair.faithful for j in rows) / len(rows),
            "mean_faithfulness": sum(j.faithfulness for j in rows) / len(rows),
            "wrong": [j.pair.seed for j in rows if j.verdict != j.pair.faithful],
        }
        if faithful and not rows[0].pair.faithful:  # this kind against the faithful answers
            both = faithful + rows
            out["by_kind"][kind]["auroc"] = {
                name: auroc([j.pair.faithful for j in both], [j.scores[name] for j in both])
                for name in judged[0].scores
            }
    return out
