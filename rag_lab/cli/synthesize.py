"""``rag-lab synthesize [key=value ...]``: the Hydra task around :mod:`rag_lab.synthesize`
(``conf/synthesize.yaml`` says what it reads and writes)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from rag_lab.cli._run_dir import guard_run_dir
from rag_lab.errors import user_errors
from rag_lab.llm.client import check_overrides
from rag_lab.paths import CONFIG_DIR


@hydra.main(config_path=CONFIG_DIR, config_name="synthesize", version_base="1.3")
@user_errors
def task(cfg: DictConfig) -> None:
    from rag_lab import synthesize

    if cfg.synthesis.review:
        queries, qrels = synthesize.write_reviewed_split(cfg)
        print(f"split {cfg.synthesis.split}: {queries} and {qrels}")
        return
    summary = synthesize.synthesize_run(cfg)
    out = Path(cfg.paths.output_dir)
    print(
        f"{summary['kept']} of {summary['questions_generated']} questions kept "
        f"({summary['quote_not_in_source']} quotes not in their chunk, "
        f"{summary['chunks_asked']} chunks asked): review {out / synthesize.REVIEW_FILE}"
    )


@functools.wraps(task)
def main() -> None:
    """Refuse a credential pasted on the command line, then run the Hydra task."""
    user_errors(check_overrides)(sys.argv[1:])
    guard_run_dir()  # Hydra's own writes: atomic; a full disk is one line
    task()


if __name__ == "__main__":
    main()
