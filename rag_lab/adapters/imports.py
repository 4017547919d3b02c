"""What an adapter may import, and the package versions that key its results.

A foreign component is named by an import path in a *plain string* argument (``factory:
langchain_community.retrievers.BM25Retriever.from_documents``), never by a ``_target_``: Hydra
does not build it, the adapter does, after this module has checked it. Two checks, as
``rag_lab.pipeline.build.check_targets`` does for ``_target_``:

- the path starts with an allowed package (``ALLOWED_IMPORT_PREFIXES``: LangChain's and
  LlamaIndex's own packages and rag_lab), or one of the prefixes the config lists in
  ``allow_imports`` (the explicit opt-in for a team's own package: ``allow_imports: [my_rag.]``);
- what it resolves to is *defined* in such a package (``module.os.system`` starts with an allowed
  name, yet is ``os``'s).

``allow_imports`` is a code-loading argument (``rag_lab.pipeline.build.CODE_LOADING_ARGUMENTS``): a
config read from disk (an export) that sets it is refused unless the user says they trust it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from importlib import metadata as importlib_metadata
from typing import Any

from rag_lab.validate import OptionError

# packages whose callables an adapter config may name without opting in
ALLOWED_IMPORT_PREFIXES: tuple[str, ...] = (
    "langchain_core.",
    "langchain_text_splitters.",
    "langchain_community.",
    "langchain.",
    "llama_index.core.",
    "rag_lab.",
)

# distributions whose versions are part of an adapter's identity (cache keys, exports)
ADAPTER_PACKAGES: dict[str, tuple[str, ...]] = {
    "langchain": ("langchain-core", "langchain-text-splitters", "langchain-community"),
    "llamaindex": ("llama-index-core",),
}


def _prefixes(allow: Sequence[str]) -> tuple[str, ...]:
    extra = tuple(str(p) if str(p).endswith(".") else f"{p}." for p in allow or ())
    return ALLOWED_IMPORT_PREFIXES + extra


def _defined_in(obj: Any) -> str:
    """The module that defines ``obj`` (a bound class method: its class's)."""
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, type):
        return owner.__module__
    return str(getattr(obj, "__module__", "") or "")


def resolve(path: Any, name: str, allow: Sequence[str] = ()) -> Any:
    """The callable ``path`` names (``pkg.module.Class``, ``pkg.module.Class.method``,
    ``pkg.module.function``), after the allow-list checks; ``OptionError`` naming ``name``
    otherwise (``rag_lab.pipeline.build.instantiate`` turns it into a one-line ``ConfigError`` with
    the full key: ``retrievers.langchain.factory='os.system': not allowed ...``)."""
    if not isinstance(path, str) or not path.strip():
        raise OptionError(name, path, "expected an import path (package.module.Name)")
    prefixes = _prefixes(allow)
    if not f"{path}.".startswith(prefixes):
        raise OptionError(
            name,
            path,
            f"not allowed (allowed: {', '.join(p + '*' for p in prefixes)}; "
            f"opt in with allow_imports: [{path.split('.')[0]}])",
        )
    parts = path.split(".")
    obj: Any = None
    for cut in range(len(parts) - 1, 0, -1):  # the longest importable module, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError as exc:
            if cut == 1:
                raise OptionError(
                    name,
                    path,
                    f"cannot import {parts[0]} ({exc}; pip install 'rag_lab[langchain]' or "
                    "'rag_lab[llamaindex]')",
                ) from None
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            raise OptionError(name, path, f"{'.'.join(parts[:cut])} has no {attr}") from None
        break
    if not callable(obj):
        raise OptionError(name, path, "not a class or function")
    module = _defined_in(obj)
    if not f"{module}.".startswith(prefixes):
        raise OptionError(
            name, path, f"not allowed: it is defined in {module}, outside the allowed packages"
        )
    return obj


def describe(value: Any, depth: int = 3) -> Any:
    """``value`` as JSON-ready data for a cache key or a rebuild recipe: plain values as they are,
    an object built from the config (a ``tokenizer: ${tokenizer}`` argument) as its class path
    and public attributes (an ``identity`` when it has one), never its ``repr`` (which holds a
    memory address that changes every run)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): describe(v, depth) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [describe(v, depth) for v in value]
    cls = type(value)
    out: dict[str, Any] = {"class": f"{cls.__module__}.{cls.__qualname__}"}
    identity = getattr(value, "identity", None)
    if identity is not None and not callable(identity):
        out["identity"] = describe(identity, depth)
    elif depth > 0:
        attrs = getattr(value, "__dict__", {})
        out["attributes"] = {
            k: describe(v, depth - 1) for k, v in attrs.items() if not k.startswith("_")
        }
    return out


def source_digest(path: str, allow: Sequence[str] = ()) -> str | None:
    """A short hash of the source code of what ``path`` names (its class or function; a bound
    method: the method's), so an edit of the factory misses the cache; None when Python cannot
    read it back (a C extension, an interactive session)."""
    import hashlib
    import inspect

    obj = resolve(path, "factory", allow)
    try:
        text = inspect.getsource(getattr(obj, "__func__", obj))
    except (OSError, TypeError):
        return None
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def package_versions(framework: str) -> dict[str, str]:
    """Installed versions of ``framework``'s distributions (``ADAPTER_PACKAGES``), absent ones
    left out."""
    out: dict[str, str] = {}
    for dist in ADAPTER_PACKAGES[framework]:
        try:
            out[dist] = importlib_metadata.version(dist)
        except importlib_metadata.PackageNotFoundError:
            continue
    return out
