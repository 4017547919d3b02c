"""``rag-lab train embedder|reranker [hydra overrides]``."""

from __future__ import annotations

import sys

TASKS = {
    "embedder": ("rag_lab.train.embedder", "fine-tune a sentence-transformers embedder (LoRA or full) with MNRL"),
    "reranker": ("rag_lab.train.reranker", "train a cross-encoder reranker, selected and interpolated on dev"),
}


def main() -> None:
    args = sys.argv[1:]
    if not args or args[0] not in TASKS:
        lines = ["usage: rag-lab train <embedder|reranker> [key=value ...]", ""]
        lines += [f"  {name:<10} {help_}" for name, (_, help_) in TASKS.items()]
        print("\n".join(lines), file=sys.stderr if args else sys.stdout)
        sys.exit(2 if args and args[0] not in ("-h", "--help") else 0)
    import importlib

    module = importlib.import_module(TASKS[args[0]][0])
    sys.argv = [f"rag-lab train {args[0]}", *args[1:]]
    module.main()


if __name__ == "__main__":
    main()
