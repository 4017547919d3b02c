"""Meta-evaluation of the lexical faithfulness judge on CMRC 2018 (see ``rag_lab.judge.meta``).

    python benchmarks/judge_meta_eval.py --data ../shared/data --n 600 --seed 0 \
        --out benchmarks/results/judge_meta_eval.json

Prints (and writes as JSON): accuracy at faithfulness >= 0.5, AUROC of the faithfulness score and
of the continuous ``mean_support``, per pair kind, and the seconds it took.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from rag_lab.dataset import read_qrels, read_queries
from rag_lab.io import read_jsonl
from rag_lab.judge import LexicalJudge
from rag_lab.judge.meta import Pair, auroc, build_pairs


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


def evaluate(pairs: list[Pair], judge: LexicalJudge, threshold: float) -> dict:
    faith, support = [], []
    for p in pairs:
        res = judge.judge(p.query, [p.context], p.response)
        faith.append(0.0 if res.faithfulness is None else res.faithfulness)
        support.append(res.details.get("mean_support", faith[-1]))
    y = np.array([p.faithful for p in pairs])
    f, s = np.array(faith), np.array(support)
    out = {
        "n_pairs": len(pairs),
        "n_faithful": int(y.sum()),
        "threshold": threshold,
        "accuracy": float(((f >= threshold) == y).mean()),
        "auroc_faithfulness": auroc(y, f),
        "auroc_mean_support": auroc(y, s),
        "by_kind": {},
    }
    for kind in sorted({p.kind for p in pairs}):
        m = np.array([p.kind == kind for p in pairs])
        out["by_kind"][kind] = {
            "n": int(m.sum()),
            "accuracy": float(((f[m] >= threshold) == y[m]).mean()),
            "mean_faithfulness": float(f[m].mean()),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data",
        default=os.environ.get("RAG_LAB_DATA", "../shared/data"),
        help="folder holding cmrc2018/ (default: $RAG_LAB_DATA or ../shared/data)",
    )
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args()
    t0 = time.perf_counter()
    paragraphs, items = load_items(Path(args.data) / "cmrc2018")
    pairs = build_pairs(paragraphs, items, args.n, args.seed)
    res = {
        "dataset": "cmrc2018",
        "seed": args.seed,
        "judge": "lexical",
        **evaluate(pairs, LexicalJudge(), args.threshold),
    }
    res["seconds"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(res, indent=2, ensure_ascii=False))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
