"""The Hydra plugin shell of ``rag_lab.sweep.launcher`` (Hydra instantiates launchers only from
the ``hydra_plugins`` namespace, and imports every module in it at start-up: keep this light)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class ForkLauncher(Launcher):
    """A multirun's jobs in ``workers`` forked processes (``auto``: one per usable CPU, at most
    one per job), the modules named in ``preload`` imported once before forking."""

    def __init__(self, workers: Any = "auto", preload: Sequence[str] = ()) -> None:
        self.workers = workers
        self.preload = list(preload or ())
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def composes_before_running(self, n_jobs: int) -> bool:
        """True when the workers compose (validate) the batch themselves before any job runs:
        the sweeper need not compose it first (``rag_lab.cli._compose``)."""
        from rag_lab.sweep.launcher import worker_count

        return worker_count(self.workers, n_jobs) > 1

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from rag_lab.sweep.launcher import launch

        return launch(self, job_overrides, initial_job_idx)
