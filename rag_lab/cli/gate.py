"""``rag-lab gate --baseline A --candidate B --max-drop m=t --max-rise m=t``: exit 1 on a
regression. The rules are :mod:`rag_lab.analysis.gate`'s (and docs/ci_gate.md).

Exit codes: 0 no regression (warnings allowed), 1 at least one regression, 2 refusal or usage
error (unresolvable side, fingerprint mismatch, unknown or non-finite checked metric, bad flag,
a noise ratio checked without a ``--max-drop`` on a hit rate or recall).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from rag_lab.analysis.gate import GateError, gate, render_junit, render_markdown
from rag_lab.cli._options import tracking_uri_option
from rag_lab.errors import exit_status, user_errors
from rag_lab.io.atomic import write_atomic
from rag_lab.metrics.names import canonical_key


def _tolerance(text: str) -> tuple[str, float]:
    """``name=0.01`` → ``("name", 0.01)``; argparse turns the error into a usage error (exit 2)."""
    name, sep, value = text.partition("=")
    try:
        tol = float(value)
    except ValueError:
        tol = math.nan
    if not sep or not name or not (math.isfinite(tol) and tol >= 0):
        raise argparse.ArgumentTypeError(
            f"expected METRIC=TOLERANCE with TOLERANCE >= 0, got {text!r}"
        )
    return name, tol


def _alpha(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"alpha must be in (0, 1), got {text}")
    return value


def _as_dict(pairs: Sequence[tuple[str, float]], flag: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, tol in pairs:
        if canonical_key(name) in map(canonical_key, out):  # ndcg@10 = ndcg_at_10: one metric
            raise GateError(f"{flag} {name} given twice")
        out[name] = tol
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="rag-lab gate",
        description="Compare a candidate run against a baseline; exit 1 on regression.",
        epilog="exit codes: 0 no regression (warnings allowed), 1 regression, "
        "2 refusal or usage error",
    )
    side = "run folder, metrics.json path or MLflow run id"
    ap.add_argument("--baseline", required=True, help=side)
    ap.add_argument("--candidate", required=True, help=side)
    ap.add_argument(
        "--max-drop",
        type=_tolerance,
        action="extend",
        nargs="+",
        default=[],
        metavar="METRIC=TOL",
        help="fail if candidate - baseline < -TOL (and significant), e.g. ndcg_at_10=0.01",
    )
    ap.add_argument(
        "--max-rise",
        type=_tolerance,
        action="extend",
        nargs="+",
        default=[],
        metavar="METRIC=TOL",
        help="fail if candidate - baseline > TOL (and significant), e.g. noise_ratio_at_5=0.02 "
        "(a noise ratio needs a --max-drop on a hit rate or recall too)",
    )
    ap.add_argument("--alpha", type=_alpha, default=0.05, help="significance level (default 0.05)")
    ap.add_argument(
        "--no-significance",
        action="store_true",
        help="fail on the tolerance alone, even when the change is within noise",
    )
    ap.add_argument(
        "--allow-fingerprint-mismatch",
        action="store_true",
        help="compare even if the dataset fingerprints differ or are missing",
    )
    tracking_uri_option(ap, "run ids")
    ap.add_argument(
        "--no-verify",
        action="store_true",
        help="read an export side even if its files differ from its manifest.json",
    )
    ap.add_argument("--junit", type=Path, help="write JUnit XML here")
    ap.add_argument("--summary", type=Path, help="write the Markdown summary here")
    return ap


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    result = gate(
        args.baseline,
        args.candidate,
        _as_dict(args.max_drop, "--max-drop"),
        _as_dict(args.max_rise, "--max-rise"),
        args.alpha,
        significance=not args.no_significance,
        allow_fingerprint_mismatch=args.allow_fingerprint_mismatch,
        tracking_uri=args.tracking_uri,
        verify=not args.no_verify,
    )
    summary = render_markdown(result)
    print(summary, end="")
    for path, text in ((args.summary, summary), (args.junit, render_junit(result))):
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text)
    sys.exit(result.exit_code)


def run(argv: Sequence[str]) -> int:
    """The command in-process: its exit status (0 pass, 1 regression, 2 refusal)."""
    return exit_status(main, list(argv))
