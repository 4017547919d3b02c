"""``rag-lab judge --input logs.jsonl --out scores.jsonl [--judge lexical] [--set key=value ...]
[--cache DIR]``: score logged answers.

Each input line is a JSON object ``{"query", "retrieved_contexts": [str, ...], "response"
[, "reference": str | [str, ...]] [, "id"]}``. Every line is validated before any is scored; a
malformed one is reported as ``error: <file>:<line>: ...`` with exit status 2.

``--judge NAME`` instantiates ``conf/judge/NAME.yaml``; ``--set key=value`` overrides its keys
(``--judge ragas --set base_url=http://127.0.0.1:8000/v1 --set model=local``). The judge runs
through ``JudgeRunner``: failures are retried, then recorded as missing and counted; with
``--cache DIR`` verdicts of judges with an identity (nli, ragas) are cached there (the stage
cache's ``judge`` namespace; ``experiments/cache`` is the one ``rag-lab evaluate`` uses).

Each output line: ``line`` (input line number), ``id`` when given, ``faithfulness`` (null =
missing), ``refusal``, ``context_utilisation``, ``missing_facts``, ``unsupported``, with a
reference ``exact_match``, ``f1``, ``contained``, and ``context_precision`` / ``context_recall`` /
``judge_error`` when the judge gives them. The means (over non-missing values), the count of
missing faithfulness scores and of judge failures are printed.
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
from rag_lab.errors import ConfigError, DataError, RagLabError
from rag_lab.io import read_jsonl, require_file, require_key
from rag_lab.judge.runner import JudgeRunner

JUDGE_CONF = PROJECT_ROOT / "conf" / "judge"

METRICS = ("faithfulness", "context_utilisation", "context_precision", "context_recall", "exact_match", "f1",
           "contained", "refusal")


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
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a key of the judge's config (repeatable)")
    ap.add_argument("--cache", type=Path, default=None, metavar="DIR",
                    help="stage-cache folder for judge verdicts (default: no cache)")
    args = ap.parse_args(list(argv))
    try:
        records = read_logs(args.input)
        runner = build_runner(args.judge, args.set, args.cache)
        rows = [score(runner, lineno, rec) for lineno, rec in records]
    except RagLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    summary = summarise(rows)
    print(f"{args.judge} judge: {summary['n']} lines -> {args.out}")
    for m in METRICS:
        if summary[m] is not None:
            print(f"  {m:<20} {summary[m]:.4f}")
    print(f"  missing faithfulness {summary['n_missing_faithfulness']}")
    print(f"  judge failures       {runner.counts['failures']} (calls {runner.counts['calls']}, "
          f"cache hits {runner.counts['cache_hits']})")
    return 0


def build_runner(name: str, overrides: Sequence[str], cache_dir: Path | None) -> JudgeRunner:
    """The judge of ``conf/judge/<name>.yaml`` with ``key=value`` overrides, in a ``JudgeRunner``."""
    from omegaconf import OmegaConf

    from rag_lab.cache import open_cache
    from rag_lab.pipeline import instantiate

    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"--set expects KEY=VALUE, got {bad[0]!r}")
    cfg = OmegaConf.merge(OmegaConf.load(JUDGE_CONF / f"{name}.yaml"), OmegaConf.from_dotlist(list(overrides)))
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(f"judge={name} needs {', '.join(missing)} (e.g. --set {missing[0]}=...)")
    judge = instantiate(cfg, f"judge={name}")
    return JudgeRunner(judge, open_cache(cache_dir) if cache_dir else None)


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
