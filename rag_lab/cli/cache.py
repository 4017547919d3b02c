"""``rag-lab cache list|clear [--dir DIR] [--namespace NS ...]``: inspect or empty the stage cache
(:func:`rag_lab.cache.inventory` / :func:`rag_lab.cache.clear`). ``--namespace`` takes any of
:data:`rag_lab.cache.NAMESPACES`, the cache's own list, or ``figures`` (report plots kept by
content, ``rag_lab.report.figures``). ``list`` counts complete entries (an
index folder is one) and reports killed writers' temporaries on their own line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rag_lab.cache import NAMESPACES, clear, inventory
from rag_lab.errors import user_errors
from rag_lab.paths import experiments_dir
from rag_lab.report.figures import NAMESPACE as FIGURES

CHOICES = (*NAMESPACES, FIGURES)


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def parser() -> argparse.ArgumentParser:
    default = experiments_dir() / "cache"
    ap = argparse.ArgumentParser(prog="rag-lab cache", description="List or clear the stage cache.")
    ap.add_argument("action", choices=("list", "clear"))
    ap.add_argument("--dir", default=str(default), help=f"cache folder (default {default})")
    ap.add_argument(
        "--namespace",
        action="append",
        choices=CHOICES,
        help="only this stage (repeatable); default: all",
    )
    return ap


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.action == "clear":
        freed = clear(args.dir, args.namespace)
        which = ", ".join(args.namespace) if args.namespace else "all stages"
        print(f"cleared {which}: {human(freed)} freed")
        return
    inv = inventory(args.dir)
    if not inv:
        print(f"{args.dir}: empty")
        return
    width = max(map(len, CHOICES)) + 2
    print(f"{'stage':<{width}}{'entries':>9}{'size':>12}   ({args.dir})")
    shown = {ns: info for ns, info in inv.items() if not args.namespace or ns in args.namespace}
    for ns, info in shown.items():
        print(f"{ns:<{width}}{info['entries']:>9}{human(info['bytes']):>12}")
    temps = sum(info["temporary"] for info in shown.values())
    if temps:  # complete entries only above; these are what killed (or running) writers left
        size = human(sum(info["temporary_bytes"] for info in shown.values()))
        print(
            f"\n{temps} temporary file(s) or folder(s), {size}, not counted above: left by killed "
            "or running jobs; removed when a run opens the cache (if stale) or by `clear`"
        )
