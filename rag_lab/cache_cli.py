"""``rag-lab cache list|clear``: inspect or empty the stage cache."""

from __future__ import annotations

import argparse
import sys

from rag_lab import PROJECT_ROOT
from rag_lab.cache import NAMESPACES, clear, inventory

DEFAULT_DIR = PROJECT_ROOT / "experiments" / "cache"


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="rag-lab cache", description=__doc__)
    ap.add_argument("action", choices=("list", "clear"))
    ap.add_argument("--dir", default=str(DEFAULT_DIR), help=f"cache folder (default {DEFAULT_DIR})")
    ap.add_argument("--namespace", action="append", choices=NAMESPACES,
                    help="only this stage (repeatable); default: all")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.action == "list":
        inv = inventory(args.dir)
        if not inv:
            print(f"{args.dir}: empty")
            return
        print(f"{'stage':<12}{'entries':>9}{'size':>12}   ({args.dir})")
        for ns, info in inv.items():
            if not args.namespace or ns in args.namespace:
                print(f"{ns:<12}{info['entries']:>9}{human(info['bytes']):>12}")
        return
    freed = clear(args.dir, args.namespace)
    print(f"cleared {', '.join(args.namespace) if args.namespace else 'all stages'}: {human(freed)} freed")


if __name__ == "__main__":
    main()
