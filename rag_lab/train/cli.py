"""``rag-lab train embedder|reranker [hydra overrides]``."""

from __future__ import annotations

import sys

TASKS = {
    "embedder": ("rag_lab.train.embedder", "fine-tune a sentence-transformers embedder (LoRA or full) with MNRL"),
    "reranker": ("rag_lab.train.reranker", "train a cross-encoder reranker, selected and interpolated on dev"),
}


def usage() -> str:
    lines = ["usage: rag-lab train <embedder|reranker> [key=value ...] [hydra options]", "", "tasks:"]
    return "\n".join(lines + [f"  {name:<10} {help_}" for name, (_, help_) in TASKS.items()])


def main() -> None:
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help", "help"):
        print(usage())
        sys.exit(0)
    if not args or args[0] not in TASKS:
        print((f"error: unknown task {args[0]!r}\n\n" if args else "") + usage(), file=sys.stderr)
        sys.exit(2)
    import importlib

    module = importlib.import_module(TASKS[args[0]][0])
    sys.argv = [f"rag-lab train {args[0]}", *args[1:]]
    module.main()


if __name__ == "__main__":
    main()
