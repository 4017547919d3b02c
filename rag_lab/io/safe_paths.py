"""Names that become paths, and paths read from files: nothing is written or read outside the
folders the user named.

A config or a file read from disk (a run's ``config_resolved.yaml``, an export's
``pipeline.yaml``, a sweep's ``winner.json``) may name things that end up in a path: a
retriever's index folder, a bundled model's folder, a sweep job. Such a *name* must be one plain
path component (``plain_name``); such a *relative path* must stay inside its root once resolved,
symbolic links included (``inside``). A leaf: any module may import it.
"""

from __future__ import annotations

import re
from pathlib import Path

from rag_lab.errors import ConfigError

_PLAIN = re.compile(r"[A-Za-z0-9_.-]+")


def plain_name(name: object, where: str) -> str:
    """``name`` as a string when it is one plain path component (letters, digits, ``_ . -``;
    not ``.`` or ``..``); else ``ConfigError``: ``<where> <name> cannot name a file or folder``
    (``where`` says what the name is: ``"<file>: retriever name"``)."""
    text = str(name)
    if not _PLAIN.fullmatch(text) or text in (".", ".."):
        raise ConfigError(
            f"{where} {text!r} cannot name a file or folder "
            "(use letters, digits, '_', '.', '-'; not '.' or '..')"
        )
    return text


def inside(root: Path, rel: str | Path, where: str) -> Path:
    """``root / rel`` resolved, when it lies inside ``root`` (resolved too); else ``ConfigError``
    naming ``where`` (an absolute ``rel``, ``..`` parts or a symbolic link leading out)."""
    base = Path(root).resolve()
    path = (base / rel).resolve()
    if path != base and base not in path.parents:
        raise ConfigError(f"{where}: {str(rel)!r} resolves to {path}, outside {base}")
    return path
