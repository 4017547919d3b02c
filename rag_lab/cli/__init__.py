"""``rag-lab <command> [args]``: one table of commands, each a thin module of this package.

A command's module is imported only when it runs, so ``rag-lab --help`` starts fast. The
dispatcher hands the rest of the command line to the command as ``sys.argv`` (``sys.argv[0]``
is ``"rag-lab <command>"``), which is what Hydra task functions read; argparse commands read it
the same way. A command with ``tasks`` (``train``) dispatches once more, with the same code.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from rag_lab.errors import fail


class Command(NamedTuple):
    """A row of the table: ``module.entry`` is called with no arguments after ``sys.argv`` is set;
    a command with ``tasks`` has no entry of its own and picks one of them by the next word."""

    module: str
    help: str
    entry: str = "main"
    tasks: Mapping[str, Command] | None = None


_TRAIN = "rag_lab.cli.train"

COMMANDS: dict[str, Command] = {
    "evaluate": Command(
        "rag_lab.cli.evaluate", "run a pipeline over a labelled split and log metrics (-m: sweep)"
    ),
    "train": Command(
        _TRAIN,
        "fine-tune an embedder (LoRA), train a reranker or a faithfulness judge: "
        "rag-lab train embedder|reranker|judge",
        tasks={
            "embedder": Command(
                _TRAIN,
                "fine-tune a sentence-transformers embedder (LoRA or full) with MNRL",
                "embedder",
            ),
            "reranker": Command(
                _TRAIN,
                "train a cross-encoder reranker, selected and interpolated on dev",
                "reranker",
            ),
            "judge": Command(
                _TRAIN,
                "train a faithfulness cross-encoder on claims synthesised from the corpus",
                "judge",
            ),
        },
    ),
    "export": Command(
        "rag_lab.cli.export",
        "write a self-contained pipeline folder from a run or a sweep's winner",
    ),
    "gate": Command(
        "rag_lab.cli.gate", "compare a candidate run against a baseline; exit 1 on regression"
    ),
    "judge": Command(
        "rag_lab.cli.judge", "score logged (query, contexts, response) JSONL with a judge"
    ),
    "cache": Command(
        "rag_lab.cli.cache", "list or clear the stage cache (rag-lab cache list|clear)"
    ),
    "serve": Command(
        "rag_lab.cli.serve",
        "serve an export to agents: HTTP API and MCP, with metadata, flags and source health",
    ),
    "register": Command(
        "rag_lab.cli.register", "log an export as an MLflow pyfunc model (mlflow models serve)"
    ),
    "health": Command("rag_lab.cli.health", "which knowledge sources of an export are stale"),
    "llm-server": Command(
        "rag_lab.cli.llm_server", "serve a local causal LM behind an OpenAI-compatible endpoint"
    ),
    "tracking-server": Command(
        "rag_lab.cli.tracking_server",
        "start|stop|status an MLflow tracking server on PostgreSQL (parallel jobs, a team UI)",
    ),
    "report": Command(
        "rag_lab.cli.report", "write a self-contained report.html for a run or a sweep folder"
    ),
    "compare": Command(
        "rag_lab.cli.compare",
        "compare two runs of one split: paired differences, queries better/worse (+ HTML)",
    ),
    "walk": Command(
        "rag_lab.cli.walk",
        "walk from one pipeline to another a stage at a time (dev decides, test reports)",
    ),
    "runs": Command(
        "rag_lab.cli.runs",
        "MLflow runs: rag-lab runs close-stale (mark KILLED the runs of dead processes)",
        tasks={
            "close-stale": Command(
                "rag_lab.cli.runs",
                "mark KILLED the runs left RUNNING by processes of this host that died",
                "close_stale",
            ),
        },
    ),
    "traces": Command(
        "rag_lab.cli.traces",
        "MLflow traces as data: rag-lab traces to-dataset (a BEIR query set, qrels from feedback)",
    ),
    "synthesize": Command(
        "rag_lab.cli.synthesize",
        "LLM-written queries with verbatim evidence from a corpus, for review, then a split",
    ),
}

_HELP = ("-h", "--help", "help")
_HYDRA_NOTE = (
    "Hydra options work after the command: rag-lab evaluate --help, --cfg job, -m (multirun)."
)


def usage(
    table: Mapping[str, Command] = COMMANDS,
    prog: str = "rag-lab",
    noun: str = "command",
    slot: str = "command",
) -> str:
    lines = [f"usage: {prog} <{slot}> [key=value ...] [hydra options]", "", f"{noun}s:"]
    width = max(10, *(len(name) + 1 for name in table))
    lines += [f"  {name:<{width}} {cmd.help}" for name, cmd in table.items()]
    if table is COMMANDS:
        lines += ["", _HYDRA_NOTE]
    return "\n".join(lines)


def dispatch(
    table: Mapping[str, Command],
    argv: Sequence[str],
    prog: str = "rag-lab",
    noun: str = "command",
    slot: str = "command",
) -> None:
    """Run ``argv[0]``'s command of ``table`` with the rest of ``argv``. Usage on ``--help`` (exit
    0); usage and exit 2 when the word is missing or unknown."""
    text = usage(table, prog, noun, slot)
    if not argv or argv[0] in _HELP:
        print(text, file=sys.stdout if argv else sys.stderr)
        sys.exit(0 if argv else 2)
    name, rest = argv[0], list(argv[1:])
    if name not in table:
        fail(f"unknown {noun} {name!r}", text)
    cmd = table[name]
    if cmd.tasks is not None:
        dispatch(cmd.tasks, rest, f"{prog} {name}", "task", "|".join(cmd.tasks))
        return
    entry = getattr(importlib.import_module(cmd.module), cmd.entry)
    sys.argv = [f"{prog} {name}", *rest]
    entry()


def main(argv: Sequence[str] | None = None) -> None:
    """The ``rag-lab`` console script."""
    dispatch(COMMANDS, sys.argv[1:] if argv is None else argv)


__all__ = ["COMMANDS", "Command", "dispatch", "main", "usage"]
