"""The package stands on its own: a wheel built from this checkout carries every config and the
sample dataset, declares the one version, and `rag-lab evaluate` runs from its installed copy in
a directory outside the checkout (no `PROJECT_ROOT`, no editable install behind it)."""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import rag_lab

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "rag_lab"
# the developer's own, git-ignored settings (`optional local: default`): never part of a build
LOCAL_SETTINGS = Path("conf/local/default.yaml")
PIP = [sys.executable, "-m", "pip"]
WHERE = "import rag_lab; print(rag_lab.__file__, rag_lab.__version__)"
# the acceptance run, the cheap way: no model to load, no tracking store, no cache
EVALUATE = [
    "evaluate",
    "embedder=hashing",
    "retrievers=[bm25,dense]",
    "tracking=none",
    "cache.dir=null",
]


def shipped_sources() -> set[str]:
    """Wheel names of the data files the checkout holds under rag_lab/conf and rag_lab/sample."""
    return {
        f"rag_lab/{p.relative_to(PACKAGE).as_posix()}"
        for top in ("conf", "sample")
        for p in (PACKAGE / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.relative_to(PACKAGE) != LOCAL_SETTINGS
    }


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, **kw)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built like `pip wheel .`, from a copy of the build inputs: an in-tree build would
    leave build/ and a fresh egg-info in the checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(PACKAGE, src / "rag_lab", symlinks=True, ignore=skip)
    (src / "rag_lab" / LOCAL_SETTINGS).unlink(missing_ok=True)
    out = tmp / "dist"
    proc = run([*PIP, "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (built,) = out.glob("rag_lab-*.whl")
    return built


@pytest.fixture(scope="module")
def site(wheel, tmp_path_factory) -> Path:
    """The wheel installed (not editable) into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    proc = run([*PIP, "install", "--no-deps", "--target", str(target), str(wheel)])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return target


def installed_env(site: Path) -> dict[str, str]:
    """Imports resolve to `site` first; RAG_LAB_* unset so runs go to ./experiments."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_LAB_")}
    env.update(PYTHONPATH=str(site), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def test_wheel_ships_every_config_and_the_sample_dataset(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "rag_lab/conf/evaluate.yaml" in names
    assert "rag_lab/sample/maintenance_kb/queries.jsonl" in names
    data = {n for n in names if n.startswith(("rag_lab/conf/", "rag_lab/sample/"))}
    expected = shipped_sources()
    assert expected - data == set(), "in the checkout, missing from the wheel"
    assert data - expected == set(), "in the wheel, not in the checkout"
    groups = {n.split("/")[2] for n in data if n.startswith("rag_lab/conf/") and n.count("/") > 2}
    assert {"dataset", "embedder", "retrievers", "hydra", "paths", "tracking"} <= groups


def test_wheel_version_is_the_package_version(wheel):
    """One version, written in rag_lab/__init__.py; pyproject reads it (dynamic)."""
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        headers = dict(
            line.split(": ", 1) for line in zf.read(meta).decode().splitlines() if ": " in line
        )
    assert headers["Name"] == "rag_lab"
    assert headers["Version"] == rag_lab.__version__
    assert wheel.name.startswith(f"rag_lab-{rag_lab.__version__}-")


def test_installed_wheel_evaluates_outside_the_checkout(site, tmp_path):
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    assert not cwd.resolve().is_relative_to(ROOT)
    env = installed_env(site)
    where = run([sys.executable, "-c", WHERE], cwd=cwd, env=env)
    assert where.returncode == 0, where.stderr[-2000:]
    path, version = where.stdout.split()
    assert Path(path).resolve().is_relative_to(site.resolve())  # the installed copy, not ROOT
    assert version == rag_lab.__version__

    proc = run([sys.executable, "-m", "rag_lab.cli", *EVALUATE], cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (metrics_file,) = (cwd / "experiments" / "runs").glob("*/metrics.json")
    metrics = json.loads(metrics_file.read_text())
    ndcg = metrics["ndcg_at_10"]
    assert isinstance(ndcg, float) and math.isfinite(ndcg) and 0.0 < ndcg <= 1.0


def test_conf_is_the_package_conf_and_the_globs_ship_all_of_it():
    """Top-level `conf` is a symlink to rag_lab/conf (one folder, two spellings), and pyproject's
    package-data globs match every file in it and in rag_lab/sample, so a new config file type or
    folder cannot silently go missing from a wheel (the wheel test checks the same for real)."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    conf = ROOT / "conf"
    assert conf.is_symlink() and conf.resolve() == (PACKAGE / "conf").resolve()
    setuptools_cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = setuptools_cfg["package-data"]["rag_lab"]
    matched = {
        f"rag_lab/{Path(m).as_posix()}"
        for pattern in globs
        for m in glob.glob(pattern, root_dir=PACKAGE, recursive=True)
        if (PACKAGE / m).is_file()
    }
    assert shipped_sources() - matched == set(), "not matched by [tool.setuptools.package-data]"
    for group in sorted(p for p in (PACKAGE / "conf").iterdir() if p.is_dir()):
        if group.name == "local":  # only a README: default.yaml is each developer's, untracked
            continue
        yamls = {f"rag_lab/conf/{group.name}/{y.name}" for y in group.glob("*.yaml")}
        assert yamls and yamls <= matched, f"conf/{group.name}: no shipped yaml"
