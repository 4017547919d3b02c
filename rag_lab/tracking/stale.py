"""Runs left ``RUNNING`` by a process that died (``kill -9``, out of memory, a lost node).

Every run rag_lab opens is tagged with the process that opened it (:func:`process_tags`): host
name, pid, and the process's start time (``/proc/<pid>/stat``, in clock ticks since boot, so a
pid the system reused for another process does not pass for the dead one). A run on the same
host whose process is gone (no such pid, or a pid started at another time) cannot finish:
:func:`close_stale_runs` marks it ``KILLED`` with an ``ended`` tag saying why. Opening a run
does that for its experiment (``MlflowTracker.start_run``); ``rag-lab runs close-stale`` does it
for every experiment of a store. Runs of other hosts are left alone (their processes cannot be
seen from here), as are runs without the tags (logged by something else).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

HOST_TAG = "rag_lab.host"
PID_TAG = "rag_lab.pid"
START_TAG = "rag_lab.process_start"  # /proc/<pid>/stat starttime: clock ticks after boot


def process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks after boot, as text); ``None`` when there is no
    such process, or no ``/proc`` to tell."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: count after its end
    return stat[stat.rfind(")") + 2 :].split()[19]


def process_tags() -> dict[str, str]:
    """The tags naming this process: host, pid and start time."""
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), START_TAG: process_start(pid) or ""}


def is_alive(pid: int, start: str) -> bool:
    """Whether process ``pid`` runs and is the one that started at ``start`` (when known)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    now = process_start(pid)
    if now is not None and start and now != start:
        return False  # the pid was reused
    if now is None and os.path.isdir("/proc"):
        return False  # a zombie reaped between the two checks, or gone
    return True


def stale(run: Any, host: str) -> bool:
    """Whether ``run`` (an MLflow ``Run``) is ``RUNNING`` on ``host`` with its process gone."""
    tags = run.data.tags
    if run.info.status != "RUNNING" or tags.get(HOST_TAG) != host:
        return False
    try:
        pid = int(tags.get(PID_TAG, ""))
    except ValueError:
        return False
    return not is_alive(pid, tags.get(START_TAG, ""))


def close_stale_runs(client: Any, experiment_ids: Iterable[str]) -> list[str]:
    """Mark ``KILLED`` every run of ``experiment_ids`` left ``RUNNING`` on this host by a
    process that is gone (:func:`stale`); returns their ids. ``client``: an ``MlflowClient``."""
    ids = list(experiment_ids)
    if not ids:
        return []
    host = socket.gethostname()
    closed: list[str] = []
    token = None
    while True:
        page = client.search_runs(
            ids,
            filter_string=f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = '{host}'",
            max_results=1000,
            page_token=token,
        )
        for run in page:
            if stale(run, host):
                pid = run.data.tags.get(PID_TAG)
                client.set_tag(
                    run.info.run_id, "ended", f"process {pid} on {host} died before the run ended"
                )
                client.set_terminated(run.info.run_id, status="KILLED")
                closed.append(run.info.run_id)
        token = page.token
        if not token:
            break
    if closed:
        log.warning(
            "MLflow: %d run(s) left RUNNING by processes that died marked KILLED (%s)",
            len(closed),
            ", ".join(closed[:5]) + (" ..." if len(closed) > 5 else ""),
        )
    return closed


__all__ = ["close_stale_runs", "is_alive", "process_start", "process_tags", "stale"]
