"""What makes a pipeline config safe to ship and safe to load: an export's ``pipeline.yaml`` is
plain data, and an export cannot make its loader reach the network or read the host's secrets.

- **Plain data.** A config read from an export is never resolved: a ``${...}`` anywhere (an
  interpolation, ``${oc.env:VAR}``, any resolver) is refused naming the key
  (``refuse_interpolations``). Writing an export escapes a literal ``${`` (``\\${``), which loads
  back as the text it was.
- **Endpoints come from the user.** A stage that calls a service names it with ``base_url`` (where
  requests go) and ``api_key_env`` (the *name* of the environment variable holding the key). An
  export keeps neither: writing one records, per stage, that it calls an endpoint and what the run
  used (``export.endpoints``, for the reader), and blanks both. Loading it sets them only from what
  the user passes (``load_pipeline(..., endpoints={stage: {"base_url": ..., "api_key_env": ...}})``,
  ``rag-lab serve --endpoint STAGE.base_url=URL``); a stage left unnamed is refused in one line.
- **Files travel inside.** A setting naming a file outside the export (a synonyms dictionary, a
  GGUF model) is copied under ``files/`` and the setting made relative to the export
  (``bundle_files``); loading makes it absolute again, refusing a path that leaves the folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeGuard

from rag_lab.errors import ConfigError

ENDPOINT_KEYS = ("base_url", "api_key_env")
# stages that run embedded (no network) when their base_url is null: the Qdrant retriever
EMBEDDED_WITHOUT_URL = ("rag_lab.retrievers.QdrantRetriever",)
FILES_DIR = "files"
# the config sections whose stages are built from an export (the top-level ``embedder`` and
# ``tokenizer`` groups are only what the stages interpolated)
STAGE_SECTIONS = (
    "parser",
    "chunker",
    "contract",
    "permissions",
    "query_transforms",
    "retrievers",
    "fusion",
    "reranker",
    "postprocess",
    "fallback",
    "sources",
    "context",
    "generator",
    "judge",
)


def _walk(node: Any, where: str) -> Iterator[tuple[str, Any, Any, Any]]:
    """``(dotted key, parent, key, value)`` of every value under ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{where}.{key}" if where else str(key)
            yield here, node, key, value
            yield from _walk(value, here)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            here = f"{where}[{i}]"
            yield here, node, i, value
            yield from _walk(value, here)


def escape_interpolations(node: Any) -> None:
    """Escape every literal ``${`` of ``node``'s strings (changed in place) so the written file
    holds no interpolation."""
    for _, parent, key, value in list(_walk(node, "")):
        if isinstance(value, str) and "${" in value:
            parent[key] = value.replace("\\${", "${").replace("${", "\\${")


def refuse_interpolations(node: Any, source: str) -> None:
    """``ConfigError`` naming the first key whose value holds an unescaped ``${`` (or whose
    name does)."""
    for where, _, key, value in _walk(node, ""):
        for text in (value, key):
            if isinstance(text, str) and "${" in text.replace("\\${", ""):
                raise ConfigError(
                    f"{source}: refusing to load: {where} holds an interpolation ({text[:80]!r}); "
                    "an export's pipeline.yaml is plain data, never resolved"
                )


def _calls_endpoint(node: Any) -> TypeGuard[dict[str, Any]]:
    if not isinstance(node, dict) or not any(k in node for k in ENDPOINT_KEYS):
        return False
    # an embedded-capable stage with no base_url runs in-process (its key variable is unused)
    return not (node.get("_target_") in EMBEDDED_WITHOUT_URL and not node.get("base_url"))


def endpoint_stages(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every stage node under ``STAGE_SECTIONS`` that calls an endpoint (has an endpoint key;
    an ``EMBEDDED_WITHOUT_URL`` stage only with a ``base_url``), by dotted path."""
    found: dict[str, dict[str, Any]] = {}
    for section in STAGE_SECTIONS:
        node = config.get(section)
        if _calls_endpoint(node):
            found[section] = node
        for where, _, _, value in _walk(node, section):
            if _calls_endpoint(value):
                found[where] = value
    return found


def strip_endpoints(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Blank the endpoint keys of every stage (and of the top-level groups they were
    interpolated from) in place; returns what each stage used, by dotted path."""
    used: dict[str, dict[str, Any]] = {}
    for where, node in endpoint_stages(config).items():
        used[where] = {k: node.get(k) for k in ENDPOINT_KEYS if k in node}
        for k in ENDPOINT_KEYS:
            if k in node:
                node[k] = None
    for group in ("embedder", "generator", "judge"):  # the groups the stages interpolated
        top = config.get(group)
        if isinstance(top, dict):
            for k in ENDPOINT_KEYS:
                if k in top:
                    top[k] = None
    return used


def apply_endpoints(
    config: dict[str, Any], given: Mapping[str, Mapping[str, Any]], source: str
) -> None:
    """Set each endpoint stage's ``base_url`` / ``api_key_env`` from ``given`` only (in place);
    the file's own values are never used. ``ConfigError`` for a stage without a ``base_url``
    given, or an entry of ``given`` that names no endpoint stage."""
    stages = endpoint_stages(config)
    unknown = sorted(set(given) - set(stages))
    if unknown:
        known = ", ".join(stages) or "none"
        raise ConfigError(
            f"endpoint {unknown[0]!r} names no stage of {source} that calls one (stages: {known})"
        )
    for where, node in stages.items():
        mine = dict(given.get(where) or {})
        bad = sorted(set(mine) - set(ENDPOINT_KEYS))
        if bad:
            raise ConfigError(f"endpoint {where}.{bad[0]}: only {', '.join(ENDPOINT_KEYS)}")
        if not mine.get("base_url"):
            raise ConfigError(
                f"{source}: {where} calls an endpoint, which an export does not choose: name it "
                f"(load_pipeline(..., endpoints={{{where!r}: {{'base_url': URL, "
                f"'api_key_env': NAME}}}}) / rag-lab serve --endpoint {where}.base_url=URL)"
            )
        node["base_url"] = str(mine["base_url"])
        node["api_key_env"] = None if mine.get("api_key_env") is None else str(mine["api_key_env"])


def bundle_files(config: dict[str, Any], staging: Path) -> dict[str, str]:
    """Copy every file a stage setting names (an absolute path to an existing file outside
    ``staging``) into ``staging/files/`` and make the setting relative to the export, in place.
    Returns ``{dotted key: relative path}``."""
    bundled: dict[str, str] = {}
    by_source: dict[Path, str] = {}
    for section in STAGE_SECTIONS:
        for where, parent, key, value in list(_walk(config.get(section), section)):
            if not isinstance(value, str) or not value.startswith("/"):
                continue
            path = Path(value)
            if not path.is_file():
                continue
            src = path.resolve()
            if src not in by_source:
                rel = f"{FILES_DIR}/{len(by_source)}-{src.name}"
                (staging / FILES_DIR).mkdir(exist_ok=True)
                shutil.copy2(src, staging / rel)
                by_source[src] = rel
            parent[key] = bundled[where] = by_source[src]
    return bundled
