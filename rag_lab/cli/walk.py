"""``rag-lab walk [--walk NAME|FILE] [--out DIR] [--svg FILE] [override ...]``: walk from one
pipeline to another a stage at a time, each step kept or dropped on the select split, every step
reported on the report split (:mod:`rag_lab.analysis.walk`), then write the walk's ``report.html``
with its waterfall (:mod:`rag_lab.report.waterfall`).

    rag-lab walk                                        # conf/walk/tutorial_to_production.yaml
    rag-lab walk --svg docs/waterfall.svg tracking=none       # + the README's figure, no MLflow
    rag-lab walk embedder=hashing                             # an evaluate override on every step
    rag-lab walk postprocess.cross_encoder.model=<dir>        # the cross-encoder step runs too
    rag-lab walk --workers 1                                  # the splits one after the other
    rag-lab walk --report experiments/walks/tutorial_to_production   # the page again, no runs
    rag-lab walk --report experiments/walks/tutorial_to_production \
        --svg docs/waterfall_context_utilisation.svg --svg-metric answer_context_utilisation

The overrides are ``rag-lab evaluate``'s, given to every step (after the step's own). A step's
two splits are evaluated at once by ``--workers`` forked processes (default 2), each keeping the
models it loaded for the later steps; each split's console summary goes to its run folder's
``console.txt``. The
folder gets ``walk.json``, ``report.html`` and ``<split>/<nn>_<step>/`` run folders.

Exit codes: 0 walked, 2 refusal or usage error (``error: <reason>`` on stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path

from rag_lab.errors import ConfigError, exit_status, user_errors


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="rag-lab walk",
        description="Greedy stage-by-stage walk between two pipelines, with a waterfall report.",
    )
    ap.add_argument(
        "--walk",
        default="tutorial_to_production",
        help="a walk under conf/walk/ by name, or a YAML file (default tutorial_to_production)",
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="walk folder (default experiments/walks/<name>)"
    )
    ap.add_argument("--svg", type=Path, default=None, help="also write the waterfall SVG here")
    ap.add_argument(
        "--svg-metric", default=None, help="the SVG's metric (default the walk's select_metric)"
    )
    ap.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="DIR",
        help="rewrite the report of a finished walk folder (its walk.json); runs nothing",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=2,
        help="processes evaluating a step's two splits at once (1: one after the other)",
    )
    ap.add_argument("overrides", nargs="*", help="rag-lab evaluate overrides for every step")
    return ap


def plan_path(walk: str) -> Path:
    from rag_lab.paths import CONFIG_DIR

    path = Path(walk)
    if path.suffix in (".yaml", ".yml"):
        return path
    path = Path(CONFIG_DIR) / "walk" / f"{walk}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ConfigError(f"walk {walk!r}: no conf/walk/{walk}.yaml (known: {', '.join(known)})")
    return path


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    from rag_lab.analysis.walk import (
        StepWorkers,
        evaluate_step,
        load_plan,
        read_result,
        run_walk,
        train_step,
    )
    from rag_lab.report.waterfall import write_walk_report, write_waterfall_svg

    if args.report is not None:
        result = read_result(args.report)
        out = args.report
    else:
        from rag_lab.llm.client import check_overrides
        from rag_lab.paths import experiments_dir

        check_overrides(args.overrides)  # no credential on the command line
        plan = load_plan(plan_path(args.walk))
        out = args.out or experiments_dir() / "walks" / plan.name
        if args.workers < 1:
            raise ConfigError(f"--workers {args.workers}: needs at least 1")
        with contextlib.ExitStack() as stack:
            workers = stack.enter_context(StepWorkers(args.workers)) if args.workers > 1 else None
            result = run_walk(
                plan,
                evaluate_step,
                out,
                args.overrides,
                log=lambda m: print(m, file=sys.stderr, flush=True),
                train=train_step,
                workers=workers,
            )
    print(f"report: {write_walk_report(result, out)}")
    if args.svg is not None:
        print(f"svg: {write_waterfall_svg(result, args.svg, args.svg_metric)}")


def run(argv: Sequence[str]) -> int:
    """The command in-process: its exit status (0 walked, 2 refusal or usage error)."""
    return exit_status(main, list(argv))
