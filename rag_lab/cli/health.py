"""``rag-lab health EXPORT [--max-age-days TYPE=DAYS ...] [--json] [--fail-on-stale]``: the
knowledge sources of an export and which are stale (older than their type's age limit) or
undated (:meth:`rag_lab.export.load.ExportedPipeline.health`).

Exit codes: 0 reported (1 with ``--fail-on-stale`` when a source is stale), 2 refusal."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from rag_lab.cli.serve import add_export_options, max_age
from rag_lab.errors import exit_status, user_errors


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="rag-lab health", description="Which knowledge sources of an export are stale."
    )
    add_export_options(ap)
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--fail-on-stale", action="store_true", help="exit 1 when a source is stale")
    return ap


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    from rag_lab.contract.age import AgeRule
    from rag_lab.export.load import load_pipeline

    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    exported = load_pipeline(
        args.export, verify=not args.no_verify, trust_remote_code=args.trust_remote_code
    )
    exported.age_rule = AgeRule(max_age(args.max_age_days))
    report = exported.health()
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(
            f"{report['n_sources']} sources on {report['today']}: {len(report['stale'])} stale, "
            f"{len(report['undated'])} undated (max age {report['max_age_days']})"
        )
        for s in report["stale"]:
            print(
                f"  stale  {s['doc_id']}  {s['source_type']}  last updated {s['last_updated']} "
                f"({s['age_days']} days > {s['max_age_days']})"
            )
        for doc in report["undated"]:
            print(f"  undated  {doc}")
    if args.fail_on_stale and report["stale"]:
        sys.exit(1)


def run(argv: Sequence[str]) -> int:
    return exit_status(main, list(argv))
