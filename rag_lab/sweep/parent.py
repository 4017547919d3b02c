"""A sweep's MLflow parent run is opened by ``on_multirun_start`` and closed by
``on_multirun_end``; this module closes it on every other way a sweep ends, so none is left
RUNNING:

- the sweep process exits without reaching the end (a job raised, ``sys.exit``): ``FAILED``
  (``atexit``);
- SIGTERM or SIGINT (Ctrl-C) during the sweep: ``KILLED``, then the signal's usual effect;
- SIGKILL, a power cut: nothing runs, so the next sweep started in the same sweep folder reads
  the old ``sweep_parent.json`` and marks that parent ``KILLED`` (:func:`close_stale_parent`)
  before it opens its own (tagged ``previous_parent``).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


def close_stale_parent(tracker: Any, parent_file: Path) -> str | None:
    """Mark ``KILLED`` the parent run named by an earlier sweep's ``parent_file`` when it is
    still RUNNING in this tracker's store (that sweep died without closing it). Returns its run
    id when there was an earlier parent in this store (closed now or before), else None."""
    try:
        old = json.loads(parent_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.warning("%s: unreadable (%s); not closing an earlier parent run", parent_file, exc)
        return None
    run_id = old.get("run_id") if isinstance(old, dict) else None
    if not isinstance(run_id, str) or old.get("uri") != tracker.uri:
        return None
    status = tracker.run_status(run_id)
    if status is None:
        return None
    if status == "RUNNING":
        tracker.end_run(
            run_id,
            "KILLED",
            {"ended": f"stopped before it finished; sweep restarted in {parent_file.parent}"},
        )
        log.warning(
            "sweep parent run %s (from %s) was left RUNNING by a sweep that died: marked KILLED",
            run_id,
            parent_file,
        )
    return run_id


class ParentGuard:
    """Closes the parent run ``run_id`` if the sweep ends any way but :meth:`done` (see the
    module docstring). Signal handlers are installed only from the main thread."""

    def __init__(self, tracker: Any, run_id: str) -> None:
        self.tracker, self.run_id = tracker, run_id
        self._previous: dict[int, Any] = {}
        self._open = True
        atexit.register(self._at_exit)
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                # an ignored signal stays ignored (a sweep started in the background by a
                # script ignores SIGINT): it would not end the sweep, so it closes nothing
                if signal.getsignal(sig) is not signal.SIG_IGN:
                    self._previous[sig] = signal.signal(sig, self._on_signal)

    def done(self) -> None:
        """The sweep closed its parent itself: stand down."""
        self._open = False
        atexit.unregister(self._at_exit)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def close(self, status: str, why: str) -> None:
        if not self._open:
            return
        self._open = False
        try:
            self.tracker.end_run(self.run_id, status, {"ended": why})
            log.warning("sweep parent run %s marked %s (%s)", self.run_id, status, why)
        except Exception as exc:  # the store may be gone; never mask the signal or the exit
            log.warning("could not mark sweep parent run %s %s: %s", self.run_id, status, exc)

    def _at_exit(self) -> None:
        self.close("FAILED", "the sweep exited before it finished")

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous.get(signum, signal.SIG_DFL)
        self.close("KILLED", f"{signal.Signals(signum).name} during the sweep")
        self.done()  # restores the previous handlers
        if callable(previous):
            previous(signum, frame)  # SIGINT's default: KeyboardInterrupt
        elif previous == signal.SIG_DFL:
            os.kill(os.getpid(), signum)
