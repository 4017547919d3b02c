"""Content hashes of a folder's files (``manifest.json``): written when an export is made,
checked when it is loaded, so a changed, missing or added file is refused by name.

Format::

    {"format_version": 1, "algorithm": "sha256",
     "files": {"<relative posix path>": {"sha256": "<hex>", "bytes": <size>}, ...}}

Every regular file under the root is listed except ``manifest.json`` itself. A manifest says the
files are the ones its writer wrote; it does not say the writer is to be trusted (an export from
elsewhere carries a manifest its author made).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rag_lab.errors import DataError
from rag_lab.io.files import sha256_file

MANIFEST_FILE = "manifest.json"
FORMAT_VERSION = 1


def _entries(root: Path) -> dict[str, Path]:
    """``{relative posix path: path}`` of everything under ``root`` but the manifest and folders
    (symbolic links are listed, so ``verify_manifest`` can refuse them)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            continue
        rel = path.relative_to(root).as_posix()
        if rel != MANIFEST_FILE:
            out[rel] = path
    return out


def write_manifest(root: Path) -> Path:
    """Hash every file under ``root`` into ``root/manifest.json``; returns its path."""
    root = Path(root)
    files = {
        rel: {"sha256": sha256_file(p), "bytes": p.stat().st_size}
        for rel, p in _entries(root).items()
    }
    doc = {"format_version": FORMAT_VERSION, "algorithm": "sha256", "files": files}
    path = root / MANIFEST_FILE
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


def _listed(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable manifest ({type(exc).__name__})") from None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, dict) or doc.get("algorithm") != "sha256":
        raise DataError(f"{path}: expected {{'algorithm': 'sha256', 'files': {{...}}}}")
    return files


def verify_manifest(root: Path) -> bool:
    """Check the files under ``root`` against ``root/manifest.json``: ``True`` when they match,
    ``False`` when there is no manifest (an export written by rag_lab 0.1).
    Raises ``DataError`` naming the first file that differs, is missing, is not in the manifest,
    or is a symbolic link (the hint: ``verify=False`` / ``--no-verify``)."""
    root = Path(root)
    path = root / MANIFEST_FILE
    if not path.exists():
        return False
    listed = _listed(path)
    present = _entries(root)
    hint = "the export was changed after it was written (verify=False / --no-verify to load it)"
    for rel, file in present.items():
        if file.is_symlink() or not file.is_file():
            raise DataError(f"{root}: {rel} is not a plain file (a link?); {hint}")
    for rel in sorted(set(listed) | set(present)):
        if rel not in present:
            raise DataError(f"{root}: {rel} is missing (listed in {MANIFEST_FILE}); {hint}")
        if rel not in listed:
            raise DataError(f"{root}: {rel} is not in {MANIFEST_FILE}; {hint}")
        file = present[rel]
        entry = listed[rel]
        expected = entry.get("sha256") if isinstance(entry, dict) else None
        if sha256_file(file) != expected:
            raise DataError(f"{root}: {rel} differs from its sha256 in {MANIFEST_FILE}; {hint}")
    return True
