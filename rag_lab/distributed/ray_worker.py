"""What a Ray worker process does before it runs a rag_lab job or encoding task.

Ray starts worker processes in the directory ``ray start`` ran in, with that command's
environment, not the sweep's: a job there would resolve ``paths.experiments`` (``./experiments``)
and relative paths (``dataset.path=../shared/data/scifact``, a relative ``hydra.sweep.dir``)
against another folder, and log its MLflow child into another store than its parent's (seen with
hydra-ray-launcher 1.2.2 and Ray 2.60). ``conf/hydra/launcher/ray.yaml`` therefore passes the
sweep's working directory (``RAG_LAB_WORKDIR``) and experiments folder (``RAG_LAB_EXPERIMENTS``,
read by ``rag_lab.paths``) in the job's ``runtime_env`` and names :func:`enter_workdir` as its
``worker_process_setup_hook``, which Ray calls in every worker process of the job before its
first task (tasks the job starts, such as ``encoding=ray``'s, inherit the runtime env).
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

WORKDIR_ENV = "RAG_LAB_WORKDIR"


def enter_workdir() -> None:
    """``chdir`` to ``$RAG_LAB_WORKDIR`` when set; a folder this node does not have is a warning
    (its jobs then resolve relative paths against the worker's own directory)."""
    workdir = os.environ.get(WORKDIR_ENV)
    if not workdir:
        return
    try:
        os.chdir(workdir)
    except OSError as exc:
        log.warning(
            "%s=%s: cannot enter it on this node (%s); relative paths resolve against %s",
            WORKDIR_ENV,
            workdir,
            exc.strerror,
            os.getcwd(),
        )
