"""Hydra callbacks the launcher tests add to a sweep (``+hydra.callbacks.<name>._target_=...``)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback


class RecordProcess(Callback):
    """Writes ``process.json`` (pid, parent pid, ``OMP_NUM_THREADS``) into each job's folder and
    the sweep process's pid into the sweep folder."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        Path(config.hydra.sweep.dir).mkdir(parents=True, exist_ok=True)
        (Path(config.hydra.sweep.dir) / "sweep_pid").write_text(str(os.getpid()))

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        info = {"pid": os.getpid(), "ppid": os.getppid(), "omp": os.environ.get("OMP_NUM_THREADS")}
        (Path(config.hydra.runtime.output_dir) / "process.json").write_text(json.dumps(info))


class KillJob(Callback):
    """SIGKILLs the process that starts job number ``num`` (a worker dying mid-job)."""

    def __init__(self, num: int = 0) -> None:
        self.num = num

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        if config.hydra.job.num == self.num:
            os.kill(os.getpid(), signal.SIGKILL)


class HoldJob(Callback):
    """Writes ``started.<pid>`` into the sweep folder when a job starts, then sleeps ``seconds``
    (a job long enough to be interrupted)."""

    def __init__(self, seconds: float = 60.0) -> None:
        self.seconds = seconds

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        import time

        (Path(config.hydra.sweep.dir) / f"started.{os.getpid()}").touch()
        # in short sleeps, as a job computes: a signal the kernel gives another thread of this
        # process does not wake a long sleep, and Python's handler runs only when it ends
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
