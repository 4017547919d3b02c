"""Build the judge meta-evaluation suites from the hand-written seeds (deterministic).

    python scripts/make_judge_meta.py            # writes datasets/judge_meta/{en,zh}.jsonl and
                                                 # datasets/judge_meta/v2/{en,zh}.jsonl
    python scripts/make_judge_meta.py --check    # exit 1 when the shipped files are out of date

Seeds (``datasets/judge_meta/seeds.jsonl``, one JSON object a line): ``id``, ``lang`` (en | zh),
``group`` (seeds of one group are each other's wrong passage), ``split`` (dev | test), ``query``,
``passage``, ``answer`` (several sentences, written from the passage), ``edits`` (``{kind:
[[old, new], ...]}`` for number, code, unit, date, entity: ``old`` is replaced once in the answer,
``new`` must not be in the passage) and ``outside`` (a sentence the passage does not support).
The pairs and their kinds: ``rag_lab.judge.evaluation.meta.suite_pairs``.

The second suites (``datasets/judge_meta/v2/seeds.jsonl``, issue 33) have their own seed format
and kinds (a value changed to one the passage states for something else, an invented step):
``rag_lab.judge.evaluation.meta.suite_pairs_v2``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rag_lab.judge.evaluation.meta import Pair, read_seeds, suite_pairs, suite_pairs_v2

ROOT = Path(__file__).resolve().parents[1] / "datasets" / "judge_meta"


def render(seeds_path: Path, v2: bool = False) -> dict[str, str]:
    seeds = read_seeds(seeds_path)
    pairs: list[Pair] = suite_pairs_v2(seeds) if v2 else suite_pairs(seeds)
    out: dict[str, str] = {}
    for lang in sorted({p.lang for p in pairs}):
        lines = [json.dumps(p.to_json(), ensure_ascii=False) for p in pairs if p.lang == lang]
        out[f"{lang}.jsonl"] = "\n".join(lines) + "\n"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=Path, default=ROOT / "seeds.jsonl")
    ap.add_argument("--out", type=Path, default=ROOT)
    ap.add_argument("--check", action="store_true", help="only compare with the files in --out")
    args = ap.parse_args()
    files = render(args.seeds)
    if args.seeds == ROOT / "seeds.jsonl" and args.out == ROOT:
        files |= {f"v2/{n}": t for n, t in render(ROOT / "v2" / "seeds.jsonl", v2=True).items()}
    stale = [
        n
        for n, t in files.items()
        if not (args.out / n).is_file() or (args.out / n).read_text(encoding="utf-8") != t
    ]
    if args.check:
        for n in stale:
            print(f"{args.out / n} is out of date: run scripts/make_judge_meta.py", file=sys.stderr)
        return 1 if stale else 0
    for name, text in files.items():
        (args.out / name).write_text(text, encoding="utf-8")
        print(f"{args.out / name}: {text.count(chr(10))} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
