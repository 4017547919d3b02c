"""``rag-lab train embedder|reranker|judge [key=value ...]``: the Hydra tasks around
:func:`rag_lab.train.embedder.train_embedder`, :func:`rag_lab.train.reranker.train_reranker` and
:func:`rag_lab.train.judge.train_judge` (configs ``conf/train_embedder.yaml``,
``conf/train_reranker.yaml``, ``conf/train_judge.yaml``). All write into ``train.output_dir``
and return nothing: there is no train sweep to optimise.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import hydra
from omegaconf import DictConfig

from rag_lab.cli._run_dir import guard_run_dir
from rag_lab.errors import user_errors
from rag_lab.paths import CONFIG_DIR


@hydra.main(config_path=CONFIG_DIR, config_name="train_embedder", version_base="1.3")
@user_errors
def _embedder(cfg: DictConfig) -> None:
    from rag_lab.train.embedder import train_embedder  # torch and transformers load here

    train_embedder(cfg)


@hydra.main(config_path=CONFIG_DIR, config_name="train_reranker", version_base="1.3")
@user_errors
def _reranker(cfg: DictConfig) -> None:
    from rag_lab.train.reranker import train_reranker

    train_reranker(cfg)


@functools.wraps(_embedder)
def embedder() -> None:
    """``rag-lab train embedder``: Hydra's own writes guarded (a full disk is one line)."""
    guard_run_dir()
    _embedder()


@functools.wraps(_reranker)
def reranker() -> None:
    """``rag-lab train reranker``: Hydra's own writes guarded (a full disk is one line)."""
    guard_run_dir()
    _reranker()


@hydra.main(config_path=CONFIG_DIR, config_name="train_judge", version_base="1.3")
@user_errors
def _judge(cfg: DictConfig) -> None:
    from rag_lab.train.judge import train_judge

    train_judge(cfg)


@functools.wraps(_judge)
def judge() -> None:
    """``rag-lab train judge``: Hydra's own writes guarded (a full disk is one line)."""
    guard_run_dir()
    _judge()


def main(argv: Sequence[str] | None = None) -> None:
    """``rag-lab train <task> ...`` (what the old ``rag_lab.cli.train.main`` was): the command
    table picks the task."""
    import sys

    from rag_lab.cli import COMMANDS, dispatch

    dispatch(COMMANDS, ["train", *(sys.argv[1:] if argv is None else argv)])
