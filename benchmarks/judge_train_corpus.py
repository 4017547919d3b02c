"""The corpus of the measured ``rag-lab train judge`` classifier (docs/results/judges.md):
200 SciFact abstracts and 200 CMRC 2018 paragraphs (300-1,500 characters, a seeded sample) with
every document of the judge meta-evaluation v2 seeds (dev and held-out test) left out, written as
a BEIR folder (one placeholder query: training reads only the corpus).

    python benchmarks/judge_train_corpus.py --data ../shared/data --out /tmp/judge_corpus
    rag-lab train judge dataset=beir dataset.path=/tmp/judge_corpus chunker=recursive \
        train.name=judge33 ...   (the settings: docs/results/judges.md)
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SEEDS = Path(__file__).resolve().parents[1] / "datasets" / "judge_meta" / "v2" / "seeds.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="folder holding scifact/, cmrc2018/")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--per-source", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with SEEDS.open(encoding="utf-8") as f:
        held = {json.loads(line)["source"].split(":")[-1] for line in f if line.strip()}
    rng = random.Random(args.seed)
    docs: list[dict] = []
    for source in ("scifact", "cmrc2018"):
        with (args.data / source / "corpus.jsonl").open(encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        rows = [d for d in rows if d["_id"] not in held and 300 <= len(d["text"]) <= 1500]
        docs += rng.sample(rows, args.per_source)
    (args.out / "qrels").mkdir(parents=True, exist_ok=True)
    with (args.out / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for d in docs:
            rec = {"_id": d["_id"], "title": d.get("title", ""), "text": d["text"]}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    (args.out / "queries.jsonl").write_text('{"_id": "q0", "text": "placeholder"}\n')
    (args.out / "qrels" / "test.tsv").write_text(
        f"query-id\tcorpus-id\tscore\nq0\t{docs[0]['_id']}\t1\n"
    )
    print(f"{args.out}: {len(docs)} documents, {len(held)} seed documents left out")


if __name__ == "__main__":
    main()
