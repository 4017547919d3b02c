"""``winner.json``, the sweep's verdict, and the one check every reader of it applies: its ``job``
names a folder *inside* the sweep folder (a plain name: no ``/``, no ``..``, not absolute, not a
link out), so a hand-edited or hostile ``winner.json`` cannot point a reader elsewhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rag_lab.errors import ConfigError

WINNER_FILE = "winner.json"


def job_dir(sweep_dir: Path, job: Any, source: Path | None = None) -> Path:
    """``sweep_dir / job`` when ``job`` is the plain name of a folder inside ``sweep_dir``;
    otherwise ``ConfigError`` naming ``source`` (the file the name came from) and the name."""
    where = source or sweep_dir
    name = str(job) if isinstance(job, (str, int)) and not isinstance(job, bool) else None
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise ConfigError(f"{where}: job {job!r} is not the name of a job folder in {sweep_dir}")
    path = Path(sweep_dir) / name
    if path.is_symlink() or not path.is_dir():
        raise ConfigError(f"{where}: job {job!r} has no folder in {sweep_dir}")
    if path.resolve().parent != Path(sweep_dir).resolve():  # belt and braces (bind mounts, ...)
        raise ConfigError(f"{where}: job {job!r} resolves outside {sweep_dir}")
    return path


def read_winner(sweep_dir: Path) -> tuple[dict[str, Any], Path]:
    """``(winner.json's content, the winner's job folder)`` of a finished sweep; ``ConfigError``
    naming the file when it is missing, unreadable, or its ``job`` is not a folder inside
    ``sweep_dir`` (:func:`job_dir`)."""
    sweep_dir = Path(sweep_dir)
    path = sweep_dir / WINNER_FILE
    if not path.is_file():
        raise ConfigError(f"{sweep_dir}: no {WINNER_FILE} (not a finished sweep folder)")
    try:
        winner = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable {WINNER_FILE} ({exc})") from None
    if not isinstance(winner, dict):
        raise ConfigError(f'{path}: expected a JSON object with a "job"')
    return winner, job_dir(sweep_dir, winner.get("job"), source=path)
