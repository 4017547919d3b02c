"""``rag-lab <command> [hydra overrides]``: a thin dispatcher to the Hydra task apps."""

from __future__ import annotations

import sys

COMMANDS = {
    "evaluate": ("rag_lab.evaluate", "run a pipeline over a labelled split and log metrics (-m: sweep)"),
    "cache": ("rag_lab.cache_cli", "list or clear the stage cache (rag-lab cache list|clear)"),
    "gate": ("rag_lab.gate", "compare a candidate run against a baseline; exit 1 on regression"),
    "export": ("rag_lab.export_cli", "write a self-contained pipeline folder from a run or a sweep's winner"),
    "train": ("rag_lab.train.cli", "fine-tune an embedder (LoRA) or train a reranker: rag-lab train embedder|reranker"),
    "judge": ("rag_lab.judge_cli", "score logged (query, contexts, response) JSONL with a judge"),
}


def usage() -> str:
    lines = ["usage: rag-lab <command> [key=value ...] [hydra options]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Hydra options work after the command: rag-lab evaluate --help, --cfg job, -m (multirun)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        sys.exit(0 if argv else 2)
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"error: unknown command {cmd!r}\n\n{usage()}", file=sys.stderr)
        sys.exit(2)
    import importlib

    module = importlib.import_module(COMMANDS[cmd][0])
    sys.argv = [f"rag-lab {cmd}", *rest]
    module.main()


if __name__ == "__main__":
    main()
