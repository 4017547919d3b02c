"""The package's shape, checked from the source (``ast``: nothing is imported): imports point down
only (no cycle, counting imports inside functions and under ``TYPE_CHECKING``), few top-level
modules, no library module reaches into the command line, and the metrics are pure functions of
runs and labels (they import no stage, pipeline, judge or generator)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rag_lab"
MAX_TOP_LEVEL = 12
# packages the metrics must not import: the stages, the pipeline, the judges, the generators
NOT_UNDER_METRICS = (
    "adapters",
    "chunker",
    "context",
    "contract",
    "dataset",
    "embedder",
    "fusion",
    "generator",
    "judge",
    "parser",
    "pipeline",
    "postprocess",
    "query_transforms",
    "reranker",
    "retrievers",
    "tokenizer",
)


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module ``name`` is in (``rag_lab.x.y.Class`` → ``rag_lab.x.y``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every rag_lab module ``module`` imports, anywhere in the file."""
    out: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            names = [f"{base}.{a.name}" for a in node.names]  # a submodule, or a name in base
            names = [n if n in known else base for n in names]
        else:
            continue
        for name in names:
            target = _resolve(name, known) if name.startswith("rag_lab") else None
            if target and target != module:
                out.add(target)
    return out


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    known = _modules()
    return {m: _imports(m, p, known) for m, p in known.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_cycles(graph):
    assert _cycles(graph) == []


def test_a_planted_cycle_is_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_few_top_level_modules():
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL, top


def test_no_library_module_imports_the_command_line(graph):
    bad = sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        if not m.startswith("rag_lab.cli")
        for d in deps
        if d.startswith("rag_lab.cli")
    )
    assert bad == []


def test_metrics_import_no_stage_pipeline_judge_or_generator(graph):
    bad = sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        if m.startswith("rag_lab.metrics")
        for d in deps
        if d.split(".")[1] in NOT_UNDER_METRICS
    )
    assert bad == []
