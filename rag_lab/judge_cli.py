"""``rag-lab judge --input logs.jsonl --out scores.jsonl [--judge lexical]``: score logged answers.

Each input line is a JSON object ``{"query", "retrieved_contexts": [str, ...], "response"
[, "reference": str | [str, ...]] [, "id"]}``. Every line is validated before any is scored; a
malformed one is reported as ``error: <file>:<line>: ...`` with exit status 2.

Each output line: ``line`` (input line number), ``id`` when given, ``faithfulness`` (null =
missing), ``refusal``, ``context_utilisation``, ``missing_facts``, ``unsupported``, and with a
reference ``exact_match``, ``f1``, ``contained``. The means (over non-missing values) and the count
of missing faithfulness scores are printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag_lab import PROJECT_ROOT
from rag_lab.answer_metrics import score_response
from rag_lab.errors import DataError, RagLabError
from rag_lab.io import read_jsonl, require_file, require_key

JUDGE_CONF = PROJECT_ROOT / "conf" / "judge"

METRICS = ("faithfulness", "context_utilisation", "exact_match", "f1", "contained", "refusal")


def read_logs(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Validated ``(line, record)`` pairs; ``DataError`` naming ``file:line`` on the first bad one."""
    out = []
    for lineno, rec in read_jsonl(require_file(path, "input")):
        where = f"{path}:{lineno}"
        if not isinstance(require_key(rec, "query", path, lineno), str):
            raise DataError(f"{where}: 'query' must be a string")
        ctx = require_key(rec, "retrieved_contexts", path, lineno)
        if not isinstance(ctx, list) or not all(isinstance(c, str) for c in ctx):
            raise DataError(f"{where}: 'retrieved_contexts' must be a list of strings")
        if not isinstance(require_key(rec, "response", path, lineno), str):
            raise DataError(f"{where}: 'response' must be a string")
        ref = rec.get("reference")
        if ref is not None and not (isinstance(ref, str) or
                                    (isinstance(ref, list) and all(isinstance(r, str) for r in ref))):
            raise DataError(f"{where}: 'reference' must be a string or a list of strings")
        out.append((lineno, rec))
    return out


def score(judge: Any, lineno: int, rec: dict[str, Any]) -> dict[str, Any]:
    row = score_response(judge, rec["query"], rec["retrieved_contexts"], rec["response"], rec.get("reference"))
    return {"line": lineno, **({"id": rec["id"]} if "id" in rec else {}), **row}


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means over non-missing values, ``n``, and ``n_missing_faithfulness``."""
    out: dict[str, Any] = {"n": len(rows)}
    for m in METRICS:
        vals = [float(r[m]) for r in rows if r.get(m) is not None]
        out[m] = sum(vals) / len(vals) if vals else None
    out["n_missing_faithfulness"] = sum(r["faithfulness"] is None for r in rows)
    return out


def run(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="rag-lab judge", description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", required=True, type=Path, help="JSONL of logged answers")
    ap.add_argument("--out", required=True, type=Path, help="per-line scores (JSONL)")
    ap.add_argument("--judge", default="lexical", choices=sorted(p.stem for p in JUDGE_CONF.glob("*.yaml")),
                    help="a config of conf/judge/ (its _target_ is instantiated)")
    args = ap.parse_args(list(argv))
    try:
        records = read_logs(args.input)
    except RagLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from omegaconf import OmegaConf

    from rag_lab.pipeline import instantiate

    judge = instantiate(OmegaConf.load(JUDGE_CONF / f"{args.judge}.yaml"), f"judge={args.judge}")
    rows = [score(judge, lineno, rec) for lineno, rec in records]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    summary = summarise(rows)
    print(f"{args.judge} judge: {summary['n']} lines -> {args.out}")
    for m in METRICS:
        if summary[m] is not None:
            print(f"  {m:<20} {summary[m]:.4f}")
    print(f"  missing faithfulness {summary['n_missing_faithfulness']}")
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
